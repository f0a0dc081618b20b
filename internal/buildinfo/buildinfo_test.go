package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

const rev = "05a0089353f5367f226291a6db8cc0c9b25e70df"

func recorded() *debug.BuildInfo {
	return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/vigilhq/vigil", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}
}

func TestABuildTheGoCommandStampedNamesItsModuleVersionAndCommit(t *testing.T) {
	if got, want := Read(Stamp{}, recorded()).Line(), "vigil v1.2.3, commit "+rev+" (modified), go1.26.8"; got != want {
		t.Errorf("version line %q, want %q", got, want)
	}
}

func TestABuildWithoutBuildInformationIsADevelBuildOfUnknownCommit(t *testing.T) {
	want := "vigil (devel), commit unknown (built without version control information), " + runtime.Version()
	if got := Read(Stamp{}, nil).Line(); got != want {
		t.Errorf("without build information: %q, want %q", got, want)
	}
}

func TestAReleaseStampWinsOverTheGoCommandsRecord(t *testing.T) {
	s := Stamp{Version: "v2.0.0", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-06T10:00:00Z"}
	got := Read(s, recorded())
	if got.Version != "v2.0.0" || got.Commit != s.Commit || got.Modified || got.Date != s.Date || got.GoVersion != "go1.26.8" {
		t.Fatalf("stamped build read as %+v", got)
	}
	if line, want := got.Line(), "vigil v2.0.0, commit "+s.Commit+", built 2026-12-06T10:00:00Z, go1.26.8"; line != want {
		t.Errorf("version line %q, want %q", line, want)
	}
	s.Modified = "true"
	if got := Read(s, nil); !got.Modified {
		t.Errorf("a stamp of a modified tree read as unmodified: %+v", got)
	}
}

func TestVersionIsThisBinarysCurrentVersion(t *testing.T) {
	if Version == "" || Version != Current().Version {
		t.Errorf("Version %q, Current().Version %q", Version, Current().Version)
	}
}
