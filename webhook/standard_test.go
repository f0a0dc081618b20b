package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// standardSecret is a Standard Webhooks secret: "whsec_" and the base64 of
// a 32-byte key.
var standardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789ABCDEF"))

// captured is one delivery as a receiver got it, taken at the manual
// clock's time.
func captured(t *testing.T, targets map[string]Target, opts Options) (hit, *recClock) {
	t.Helper()
	srv, hits := newReceiver(t, answerStatus(http.StatusOK))
	for agent, target := range targets {
		target.URL = srv.URL
		targets[agent] = target
	}
	clk := newRecClock()
	opts.Clock = clk
	d := newDispatcher(t, targets, opts)
	wake(t, d, "agent:alpha:main")
	return recv(t, hits, "the wake"), clk
}

// specSignature computes, straight from the Standard Webhooks definition
// and without the package's helpers, the v1 signature of a delivery: the
// key is the base64 after "whsec_", the signed content is
// "<webhook-id>.<webhook-timestamp>.<body>", the MAC HMAC-SHA256, and the
// header entry "v1," and the MAC in standard base64.
func specSignature(t *testing.T, whsec string, header http.Header, body []byte) string {
	t.Helper()
	encoded, ok := strings.CutPrefix(whsec, "whsec_")
	if !ok {
		t.Fatalf("%q is not a whsec_ secret", whsec)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatalf("decode the secret: %v", err)
	}
	content := header.Get("webhook-id") + "." + header.Get("webhook-timestamp") + "." + string(body)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(content))
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// specAccepts is a receiver following the specification: some entry of the
// space-separated webhook-signature header equals the expected signature.
func specAccepts(t *testing.T, whsec string, header http.Header, body []byte) bool {
	t.Helper()
	want := specSignature(t, whsec, header, body)
	for _, entry := range strings.Split(header.Get("webhook-signature"), " ") {
		if hmac.Equal([]byte(entry), []byte(want)) {
			return true
		}
	}
	return false
}

func TestAVerifierFollowingTheSpecAcceptsTheDelivery(t *testing.T) {
	for _, c := range []struct {
		name, secret string
	}{
		{"whsec secret", standardSecret},
		// Any other secret's bytes are the key; StandardSecret is the form
		// to hand a receiver's library.
		{"plain secret", testSecret},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, clk := captured(t, map[string]Target{"alpha": {Secret: c.secret}}, Options{})
			if !specAccepts(t, StandardSecret(c.secret), h.header, h.body) {
				t.Fatalf("a specification verifier refused the delivery: headers %v, body %s", h.header, h.body)
			}
			if got, want := h.header.Get("webhook-id"), h.decode(t).DeliveryID; got != want {
				t.Errorf("webhook-id = %q, want the deliveryId %q", got, want)
			}
			ts, err := strconv.ParseInt(h.header.Get("webhook-timestamp"), 10, 64)
			if err != nil || ts != clk.Now().Unix() {
				t.Errorf("webhook-timestamp = %q, want integer Unix seconds %d", h.header.Get("webhook-timestamp"), clk.Now().Unix())
			}
			if err := VerifyAt(c.secret, h.header, h.body, 0, clk.Now()); err != nil {
				t.Errorf("VerifyAt with the configured secret: %v", err)
			}
			if err := VerifyAt(StandardSecret(c.secret), h.header, h.body, 0, clk.Now()); err != nil {
				t.Errorf("VerifyAt with the whsec_ form: %v", err)
			}
		})
	}
}

func TestTheStandardFormOfEveryAcceptedSecretVerifies(t *testing.T) {
	// The shortest plain secret New accepts encodes a key shorter than a
	// configured whsec_ secret may have; receivers must still verify it.
	shortest := testSecret[:MinSecretLen]
	h, clk := captured(t, map[string]Target{"alpha": {Secret: shortest}}, Options{})
	if err := VerifyAt(StandardSecret(shortest), h.header, h.body, 0, clk.Now()); err != nil {
		t.Errorf("VerifyAt with the whsec_ form of a %d-byte secret: %v", MinSecretLen, err)
	}
	if _, err := SigningKey("whsec_"); !errors.Is(err, ErrSecret) {
		t.Errorf("SigningKey of a bare prefix: %v, want ErrSecret", err)
	}
}

func TestStandardSecretOfAPlainSecretEncodesItsBytes(t *testing.T) {
	got := StandardSecret(testSecret)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(got, "whsec_"))
	if !strings.HasPrefix(got, "whsec_") || err != nil || string(key) != testSecret {
		t.Errorf("StandardSecret(%q) = %q (%v), want whsec_ and the secret's bytes in base64", testSecret, got, err)
	}
	if got := StandardSecret(standardSecret); got != standardSecret {
		t.Errorf("StandardSecret of a whsec_ secret = %q, want it unchanged", got)
	}
}

func TestACapturedDeliveryReplayedAfterTheToleranceWindowIsRefused(t *testing.T) {
	h, clk := captured(t, alphaTarget(""), Options{})
	sent := clk.Now()
	for _, c := range []struct {
		name      string
		tolerance time.Duration
		at        time.Time
		want      error
	}{
		{"at once", 0, sent, nil},
		{"at the edge of the default window", 0, sent.Add(DefaultTolerance), nil},
		{"a second after the default window", 0, sent.Add(DefaultTolerance + time.Second), ErrTimestamp},
		{"a day later", 0, sent.Add(24 * time.Hour), ErrTimestamp},
		{"from beyond the window ahead", 0, sent.Add(-DefaultTolerance - time.Second), ErrTimestamp},
		{"within a narrower window", 30 * time.Second, sent.Add(30 * time.Second), nil},
		{"after a narrower window", 30 * time.Second, sent.Add(31 * time.Second), ErrTimestamp},
	} {
		err := VerifyAt(testSecret, h.header, h.body, c.tolerance, c.at)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: VerifyAt = %v, want %v", c.name, err, c.want)
		}
	}

	// Restamping the capture with a fresh timestamp breaks its signature.
	late := sent.Add(time.Hour)
	restamped := h.header.Clone()
	restamped.Set("webhook-timestamp", strconv.FormatInt(late.Unix(), 10))
	if err := VerifyAt(testSecret, restamped, h.body, 0, late); !errors.Is(err, ErrSignature) {
		t.Errorf("the capture restamped with the replay's time: %v, want ErrSignature", err)
	}
	// The deprecated header alone would still verify: the reason it goes.
	if !VerifyLegacy([]byte(testSecret), h.body, h.header.Get(HeaderSignature)) {
		t.Error("the legacy signature of the capture no longer verifies")
	}
}

func TestASignatureOverTheBodyOnlyDoesNotVerify(t *testing.T) {
	h, clk := captured(t, alphaTarget(""), Options{})
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(h.body)
	bodyOnly := mac.Sum(nil)
	for _, forged := range []string{
		"v1," + base64.StdEncoding.EncodeToString(bodyOnly),
		// The legacy header's MAC, moved into the standard header.
		"v1," + base64.StdEncoding.EncodeToString(mustHex(t, strings.TrimPrefix(h.header.Get(HeaderSignature), "sha256="))),
		h.header.Get(HeaderSignature),
	} {
		header := h.header.Clone()
		header.Set("webhook-signature", forged)
		if err := VerifyAt(testSecret, header, h.body, 0, clk.Now()); !errors.Is(err, ErrSignature) {
			t.Errorf("webhook-signature %q over the body only: %v, want ErrSignature", forged, err)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

func TestVerifyRefusesAWrongIDTimestampBodyOrSecret(t *testing.T) {
	h, clk := captured(t, alphaTarget(""), Options{})
	now := clk.Now()
	edit := func(name, value string) http.Header {
		c := h.header.Clone()
		if value == "" {
			c.Del(name)
		} else {
			c.Set(name, value)
		}
		return c
	}
	goodSig := h.header.Get("webhook-signature")
	for _, c := range []struct {
		name   string
		secret string
		header http.Header
		body   []byte
		want   error
	}{
		{"another id", testSecret, edit("webhook-id", "0123456789abcdef0123456789abcdef"), h.body, ErrSignature},
		{"another timestamp in the window", testSecret, edit("webhook-timestamp", strconv.FormatInt(now.Unix()-1, 10)), h.body, ErrSignature},
		{"a tampered body", testSecret, h.header, bytes.Replace(h.body, []byte("alpha:main"), []byte("alpha:evil"), 1), ErrSignature},
		{"another secret", "another-secret-0123456789", h.header, h.body, ErrSignature},
		{"no id", testSecret, edit("webhook-id", ""), h.body, ErrMissingHeader},
		{"no timestamp", testSecret, edit("webhook-timestamp", ""), h.body, ErrMissingHeader},
		{"no signature", testSecret, edit("webhook-signature", ""), h.body, ErrMissingHeader},
		{"a timestamp in milliseconds", testSecret, edit("webhook-timestamp", strconv.FormatInt(now.UnixMilli(), 10)), h.body, ErrTimestamp},
		{"a timestamp that is no integer", testSecret, edit("webhook-timestamp", "soon"), h.body, ErrTimestamp},
		{"only another version's entry", testSecret, edit("webhook-signature", "v1a,"+strings.TrimPrefix(goodSig, "v1,")), h.body, ErrSignature},
		{"a truncated signature", testSecret, edit("webhook-signature", goodSig[:len(goodSig)-4]), h.body, ErrSignature},
		{"an empty secret", "", h.header, h.body, ErrSecret},
		{"a whsec_ secret that is not base64", "whsec_not*base64", h.header, h.body, ErrSecret},
	} {
		if err := VerifyAt(c.secret, c.header, c.body, 0, now); !errors.Is(err, c.want) {
			t.Errorf("%s: VerifyAt = %v, want %v", c.name, err, c.want)
		}
	}
	// A good entry among others that do not match still verifies, in any
	// order: that is how a receiver gets through a secret rotation.
	for _, list := range []string{
		"v1,bm90IGl0 " + goodSig,
		goodSig + " v1a,c29tZXRoaW5nIGVsc2U= v1,%%%",
	} {
		if err := VerifyAt(testSecret, edit("webhook-signature", list), h.body, 0, now); err != nil {
			t.Errorf("webhook-signature %q: %v, want the good entry to verify", list, err)
		}
	}
}

func TestDuringARotationEachSecretVerifies(t *testing.T) {
	const old1, old2 = "the-secret-before-0123456789", "the-one-before-that-0123456789"
	h, clk := captured(t, map[string]Target{"alpha": {Secret: standardSecret, PreviousSecrets: []string{old1, old2}}}, Options{})
	if n := len(strings.Fields(h.header.Get("webhook-signature"))); n != 3 {
		t.Fatalf("webhook-signature %q has %d entries, want one per secret (3)", h.header.Get("webhook-signature"), n)
	}
	for _, secret := range []string{standardSecret, old1, old2} {
		if err := VerifyAt(secret, h.header, h.body, 0, clk.Now()); err != nil {
			t.Errorf("VerifyAt with %q: %v", secret, err)
		}
		if !specAccepts(t, StandardSecret(secret), h.header, h.body) {
			t.Errorf("a specification verifier with %q refused it", secret)
		}
	}
	if err := VerifyAt("never-configured-0123456789", h.header, h.body, 0, clk.Now()); !errors.Is(err, ErrSignature) {
		t.Errorf("VerifyAt with a secret never configured: %v, want ErrSignature", err)
	}
	// The deprecated header carries one signature, under the current secret.
	if !VerifyLegacy([]byte(standardSecret), h.body, h.header.Get(HeaderSignature)) {
		t.Error("Vigil-Signature is not keyed with the current secret's own bytes")
	}
}

func TestLegacyHeadersCanBeLeftOut(t *testing.T) {
	h, clk := captured(t, alphaTarget(""), Options{OmitLegacyHeaders: true})
	if got := h.header.Values(HeaderSignature); len(got) != 0 {
		t.Errorf("Vigil-Signature = %q, want none", got)
	}
	if got := h.header.Values(HeaderDelivery); len(got) != 0 {
		t.Errorf("Vigil-Delivery = %q, want none", got)
	}
	if err := VerifyAt(testSecret, h.header, h.body, 0, clk.Now()); err != nil {
		t.Errorf("VerifyAt: %v", err)
	}
}

func TestNewRefusesUnusableStandardSecretsNamingTheAgent(t *testing.T) {
	short := "whsec_" + base64.StdEncoding.EncodeToString([]byte("only-twenty-three-bytes"))
	for _, c := range []struct {
		name   string
		target Target
		says   string
	}{
		{"not base64", Target{Secret: "whsec_not*base64*at*all"}, "base64"},
		{"a key under 24 bytes", Target{Secret: short}, "at least 24 bytes"},
		{"a short previous secret", Target{Secret: testSecret, PreviousSecrets: []string{"too-short"}}, "previous secret 1"},
		{"an empty previous secret", Target{Secret: testSecret, PreviousSecrets: []string{""}}, "previous secret 1"},
	} {
		c.target.URL = "https://example.com/hook"
		_, err := New(map[string]Target{"gamma": c.target}, Options{})
		if err == nil {
			t.Errorf("%s: New accepted it", c.name)
			continue
		}
		if !strings.Contains(err.Error(), `"gamma"`) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %q does not name the agent and say %q", c.name, err, c.says)
		}
		for _, secret := range append([]string{c.target.Secret}, c.target.PreviousSecrets...) {
			if len(secret) > len("whsec_") && strings.Contains(err.Error(), strings.TrimPrefix(secret, "whsec_")) {
				t.Errorf("%s: error reveals the secret: %v", c.name, err)
			}
		}
	}
	d, err := New(map[string]Target{"gamma": {URL: "https://example.com/hook", Secret: standardSecret}}, Options{})
	if err != nil {
		t.Fatalf("New refused a 32-byte whsec_ secret: %v", err)
	}
	d.Close()
}

func TestATimestampSoFarOffThatItsAgeOverflowsIsRefused(t *testing.T) {
	// A signer that put such a timestamp in a delivery (a broken clock, a
	// bug) must not get it accepted: its age, now minus it, is the most
	// negative int64, whose negation is itself.
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	far := time.Unix(now.Unix()+math.MinInt64, 0)
	body := []byte(`{"type":"wake"}`)
	sig, err := Sign(testSecret, "msg_1", far, body)
	if err != nil {
		t.Fatal(err)
	}
	header := http.Header{}
	header.Set(HeaderID, "msg_1")
	header.Set(HeaderTimestamp, strconv.FormatInt(far.Unix(), 10))
	header.Set(HeaderStandard, sig)
	if err := VerifyAt(testSecret, header, body, 0, now); !errors.Is(err, ErrTimestamp) {
		t.Fatalf("webhook-timestamp %s at %d: VerifyAt = %v, want ErrTimestamp", header.Get(HeaderTimestamp), now.Unix(), err)
	}
}
