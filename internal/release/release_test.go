package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var testRelease = manifest{Version: "v1.2.3-rc.1", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-06T10:00:00Z"}

func TestTheReleaseFlagsStampVersionCommitAndDateAndLinkStatically(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler to link statically with")
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	cmd := exec.Command("go", "build", "-tags", strings.Join(buildTags, ","), "-ldflags", ldflags(testRelease), "-o", bin, "./testdata/printversion")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := checkELF(bin, runtime.GOARCH); err != nil {
		t.Error(err)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version, Commit, Date string
		Modified              bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != testRelease.Version || got.Commit != testRelease.Commit || got.Date != testRelease.Date || got.Modified {
		t.Errorf("the binary says %+v, the release is %+v", got, testRelease)
	}
}

func TestDarwinAndUnknownTargetsAreRefusedWithTheReason(t *testing.T) {
	if _, err := parseTargets("linux/amd64,darwin/arm64"); err == nil || !strings.Contains(err.Error(), "cgo") {
		t.Errorf("darwin: %v, want a refusal naming cgo", err)
	}
	if _, err := parseTargets("linux/riscv64"); err == nil || !strings.Contains(err.Error(), "riscv64") {
		t.Errorf("riscv64: %v", err)
	}
	if ps, err := parseTargets(defaultTargets); err != nil || len(ps) != 2 {
		t.Errorf("default targets: %v %v", ps, err)
	}
}

func TestAVersionThatCannotNameAFileIsRefused(t *testing.T) {
	for _, v := range []string{"1.2.3", "v1.2", "v1.2.3/../x", "v1.2.3 rc"} {
		if semverish.MatchString(v) {
			t.Errorf("%q accepted", v)
		}
	}
	for _, v := range []string{"v1.2.3", "v0.0.0-20261206023810-0bac8d4961d5", "v2.0.0-rc.1+meta"} {
		if !semverish.MatchString(v) {
			t.Errorf("%q refused", v)
		}
	}
}

func TestAnImagePassesItsCheckAndHoldsItsBinary(t *testing.T) {
	binary := []byte("\x7fELF not really a binary")
	img, err := platformImage(platform{"linux", "arm64"}, testRelease, binary, []byte("-----BEGIN CERTIFICATE-----\n"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" || cf.OS != "linux" || cf.Created.Format("2006-01-02T15:04:05Z") != testRelease.Date {
		t.Errorf("config file %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	uid, err := checkImageConfig(cf.Config, testRelease)
	if err != nil {
		t.Fatal(err)
	}
	files, err := imageLayerFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkImageFiles(files, binary, uid); err != nil {
		t.Error(err)
	}
	if err := checkImageFiles(files, []byte("another binary"), uid); err == nil {
		t.Error("the check passed an image holding another binary")
	}
}

func TestAnImageRunningAsRootOrWithoutItsVolumeFailsTheCheck(t *testing.T) {
	for name, change := range map[string]func(c *v1.Config){
		"root user":     func(c *v1.Config) { c.User = "0:0" },
		"named user":    func(c *v1.Config) { c.User = "vigil" },
		"no volume":     func(c *v1.Config) { c.Volumes = nil },
		"another port":  func(c *v1.Config) { c.ExposedPorts = map[string]struct{}{"8080/tcp": {}} },
		"old label":     func(c *v1.Config) { c.Labels["org.opencontainers.image.version"] = "v0.9.0" },
		"no entrypoint": func(c *v1.Config) { c.Entrypoint = nil },
	} {
		c := imageConfig(testRelease)
		change(&c)
		if _, err := checkImageConfig(c, testRelease); err == nil {
			t.Errorf("%s: the check passed", name)
		}
	}
}

func TestAFileThatNoLongerMatchesSHA256SUMSFailsTheCheck(t *testing.T) {
	dir := t.TempDir()
	m := testRelease
	m.Targets = []artifact{{OS: "linux", Arch: "amd64", Archive: "a.tar.gz", SBOM: "a.cdx.json"}}
	for _, name := range []string{"a.tar.gz", "a.cdx.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeChecksums(dir, m); err != nil {
		t.Fatal(err)
	}
	if err := checkSums(dir, m); err != nil {
		t.Fatalf("fresh checksums: %v", err)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c does not read SHA256SUMS: %v\n%s", err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.cdx.json"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkSums(dir, m); err == nil {
		t.Error("the check passed a changed SBOM")
	}
}

func TestASecondBuildIntoAFolderOfOtherFilesIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareOut(dir); err == nil {
		t.Fatal("a folder of other files was accepted, and would have been emptied")
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("the refused folder lost its file: %v", err)
	}
}
