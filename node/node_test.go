package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/node"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/webhook"
)

// hangGuard bounds every wait; nothing here comes near it.
const hangGuard = 20 * time.Second

const manager = "agent:main:main"

// person acts as the local admin, a person.
var person = gateway.Caller{Principal: gateway.LocalPrincipal}

// open opens a node, closed when the test ends.
func open(t *testing.T, opts node.Options) *node.Node {
	t.Helper()
	n, err := node.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// spawnAndWrite has the manager spawn a worker and a person write into
// it, which queues a notice for the manager; it returns the worker's key.
func spawnAndWrite(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	ctx := context.Background()
	mgr, err := g.ResolveCaller(ctx, gateway.LocalPrincipal, manager)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := g.Spawn(ctx, mgr, gateway.SpawnInput{Task: "draft the report"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Send(ctx, person, gateway.SendInput{SessionKey: sp.ChildSessionKey, Message: "use the new figures",
		TimeoutSeconds: new(int)}); err != nil {
		t.Fatal(err)
	}
	return sp.ChildSessionKey
}

func TestANodeOnASQLiteFileCreatesItsDirectoryAndCloseLetsTheFileGo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state", "vigil", "vigil.db")
	n, err := node.Open(context.Background(), node.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	if n.Shared() {
		t.Error("a node on its own SQLite file says other processes may share it")
	}
	worker := spawnAndWrite(t, n.Gateway())
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	// The file is no longer held: a node opens on it again, and finds
	// the manager's notice owed across the restart.
	again := open(t, node.Options{DB: db})
	pending := again.Engine().Pending(manager)
	if len(pending) != 2 || pending[1].Target == nil || pending[1].Target.Key != worker {
		t.Fatalf("pending after reopening = %+v, want the creation notice and the notice about %s", pending, worker)
	}
}

func TestANodeLeavesAStoreItWasGivenOpen(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := node.Open(ctx, node.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	worker := spawnAndWrite(t, n.Gateway())
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	ref := vigil.SessionRef{AgentID: "main", Key: worker}
	if _, err := n.Engine().Record(ctx, vigil.Record{Session: ref, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorAgent,
		ActorID: "main"}); !errors.Is(err, vigil.ErrClosed) {
		t.Errorf("a record after Close: %v, want vigil.ErrClosed", err)
	}
	if _, ok, err := st.Session(ctx, ref); err != nil || !ok {
		t.Fatalf("the store after the node closed: found %v, %v; want it open, with the worker", ok, err)
	}
}

func TestANodeRefusesToOpenWithoutADatabase(t *testing.T) {
	if _, err := node.Open(context.Background(), node.Options{}); err == nil {
		t.Fatal("a node without a database or a store opened")
	}
}

func TestANodeRefusesAWebhookItCouldNotDeliverAndLeavesTheFileFree(t *testing.T) {
	db := filepath.Join(t.TempDir(), "vigil.db")
	_, err := node.Open(context.Background(), node.Options{DB: db,
		Webhooks: map[string]webhook.Target{"main": {URL: "not a url", Secret: "a-webhook-secret-of-some-length"}}})
	if err == nil {
		t.Fatal("a webhook without a URL was taken")
	}
	open(t, node.Options{DB: db}) // the failed Open closed the store it had opened
}

func TestANodePostsWakesToTheAgentsWebhook(t *testing.T) {
	const secret = "a-webhook-secret-of-some-length"
	wakes := make(chan map[string]any, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var wake map[string]any
		json.Unmarshal(body, &wake)
		wakes <- wake
	}))
	defer receiver.Close()
	n := open(t, node.Options{DB: filepath.Join(t.TempDir(), "vigil.db"),
		Webhooks: map[string]webhook.Target{"main": {URL: receiver.URL, Secret: secret}}})
	spawnAndWrite(t, n.Gateway())
	select {
	case wake := <-wakes:
		if wake["type"] != "wake" || wake["sessionKey"] != manager {
			t.Fatalf("wake = %v", wake)
		}
	case <-time.After(hangGuard):
		t.Fatal("no signed wake reached the webhook (hang guard)")
	}
}

func TestANodeWithMetricsCountsItsEngineAndWebhooks(t *testing.T) {
	n := open(t, node.Options{DB: filepath.Join(t.TempDir(), "vigil.db"), Metrics: true})
	spawnAndWrite(t, n.Gateway())
	families, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range families {
		seen[f.GetName()] = true
	}
	for _, name := range []string{"vigil_events_recorded_total", "vigil_webhook_deliveries_total", "vigil_sqlite_checkpoints_total"} {
		if !seen[name] {
			t.Errorf("no %s among the node's metrics", name)
		}
	}
	if open(t, node.Options{DB: filepath.Join(t.TempDir(), "vigil.db")}).Metrics() != nil {
		t.Error("a node without Options.Metrics has a registry")
	}
}

// Two nodes on one PostgreSQL database: what one commits reaches the
// other's queues through its change listener.
func TestNodesOnOnePostgreSQLDatabaseHearEachOther(t *testing.T) {
	db := pgtest.URL() + "&schema=" + pgtest.FreshSchema(t)
	a := open(t, node.Options{DB: db})
	b := open(t, node.Options{DB: db})
	if !b.Shared() {
		t.Fatal("a node on PostgreSQL does not say other processes may share its store")
	}
	// The listener signals nothing: the test looks until it connected.
	testwait.For(t, func() error { return b.Listening(context.Background()) })
	heard := b.Gateway().Hub().Listen(manager, 16)
	defer heard.Close()
	worker := spawnAndWrite(t, a.Gateway())
	timeout := time.After(hangGuard)
	for {
		select {
		case ev := <-heard.C:
			if ev.Type == gateway.LiveNotice && ev.Notice != nil && ev.Notice.Target == worker {
				return
			}
		case <-timeout:
			t.Fatalf("the other node never queued the notice about %s (hang guard); it has %+v", worker, b.Engine().Pending(manager))
		}
	}
}

// A node sits below the transports: they are mounted on its gateway by
// whoever opens it, so it imports none of them.
func TestANodeImportsNoTransport(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/vigilhq/vigil/node").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch strings.TrimPrefix(pkg, "github.com/vigilhq/vigil/") {
		case "httpapi", "mcpserver", "a2aserver", "dashboard", "cmd/vigil":
			t.Errorf("the node imports %s", pkg)
		}
	}
}

func TestANodesGatewayRunsOnTheEnginesClockUnlessGivenItsOwn(t *testing.T) {
	clk := clock.NewManual(time.Now())
	n := open(t, node.Options{DB: filepath.Join(t.TempDir(), "vigil.db"), Engine: vigil.Options{Clock: clk},
		Gateway: gateway.Options{StuckAfter: 10 * time.Minute, AttentionEvery: time.Minute, NoCreationNotices: true}})
	g := n.Gateway()
	mgr, err := g.ResolveCaller(context.Background(), gateway.LocalPrincipal, manager)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := g.Spawn(context.Background(), mgr, gateway.SpawnInput{Task: "draft the report"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard) // a hang guard, not a timing
	defer cancel()
	child := vigil.SessionRef{AgentID: "main", Key: sp.ChildSessionKey}
	f, err := g.Follow(ctx, gateway.FollowOptions{Session: &child, After: -1, BookmarkInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	clk.Advance(10 * time.Minute) // the look at open runs is due on the gateway's clock, if it is the engine's
	errAttention := errors.New("attention recorded")
	err = f.Run(ctx, gateway.FollowReader{Events: func(events []vigil.Event) error {
		for _, e := range events {
			if e.Kind == vigil.KindAttention {
				return errAttention
			}
		}
		return nil
	}})
	if !errors.Is(err, errAttention) {
		t.Fatalf("the follow ended with %v before the stalled run was announced", err)
	}
}

func TestAMalformedPostgreSQLURLIsRefusedWithoutItsPassword(t *testing.T) {
	for _, db := range []string{
		"postgres://vigil:s3cret@db.example:port/vigil",   // a port that is no number
		"postgres://vigil:s3cret@db.example/vigil\x7f",    // a control character
		"postgresql://vigil:s3cret@[db.example/vigil?x=1", // an unclosed bracket
		"postgres://vigil:s3cret#1@db.example/vigil",      // a # not escaped: the password reads as a port
		"postgres://vigil:s3cret/1@db.example/vigil",      // a / not escaped
		"postgres://vigil:s3cret?1@db.example/vigil",      // a ? not escaped
		"postgres://vigil:s3c%zzret@db.example/vigil",     // a % that escapes nothing
	} {
		_, err := node.Open(context.Background(), node.Options{DB: db})
		if err == nil {
			t.Errorf("%q: opened", db)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows the password: %v", db, err)
		}
	}
}

func TestAPostgreSQLURLWhoseQueryCannotBeReadIsRefused(t *testing.T) {
	// Read leniently, the bad pair would be dropped, schema with it, and
	// vigil's tables would go to the server's default schema.
	_, schema, err := node.PostgresTarget("postgres://vigil@db.example/vigil?schema=team%zz")
	if err == nil {
		t.Fatalf("a query with a bad escape was taken, as schema %q", schema)
	}
}

func TestAPostgreSQLURLWhoseSchemeIsInCapitalsNamesAServer(t *testing.T) {
	db := "POSTGRES://vigil@db.example/vigil?schema=team"
	if !node.IsPostgres(db) {
		t.Fatalf("%q taken for a SQLite file", db)
	}
	server, schema, err := node.PostgresTarget(db)
	if err != nil || !strings.HasPrefix(server, "postgres://") || schema != "team" {
		t.Fatalf("PostgresTarget(%q) = %q, %q, %v; want a postgres:// server and schema team", db, server, schema, err)
	}
}

// A PostgreSQL key=value connection string is not a file name: taken as
// one it would make a SQLite file named after its password. It is
// refused, without being quoted, and nothing is made.
func TestAKeywordConnectionStringIsRefusedNotMadeIntoAFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, db := range []string{"host=127.0.0.1 password=s3cret dbname=vigil", "dbname=vigil user=me password=s3cret"} {
		st, err := node.OpenStore(t.Context(), db, "", nil)
		if err == nil {
			st.Close()
			t.Fatalf("%q opened as a store, want it refused", db)
		}
		if !strings.Contains(err.Error(), "postgres://") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("refusal %q: want it to ask for a postgres:// URL without quoting the password", err)
		}
	}
	if made, _ := os.ReadDir(dir); len(made) != 0 {
		t.Fatalf("the refusals made %d files, the first %q", len(made), made[0].Name())
	}
}
