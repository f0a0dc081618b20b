// Package buildinfo holds what a vigil binary knows of its own build: the
// version, commit and build date that the release build stamps at link
// time (go run ./internal/release), or, in any other build, what the go
// command recorded in the binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set at link time by the release build, for example
//
//	-X github.com/vigilhq/vigil/internal/buildinfo.version=v1.2.3
//
// and empty in every other build. They must stay uninitialised strings:
// the linker sets nothing else.
var version, commit, modified, date string

// Info describes a build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	Date      string `json:"date,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Stamp is what a release build sets at link time. Modified is "true"
// when the tree it built differed from Commit.
type Stamp struct {
	Version, Commit, Modified, Date string
}

var current = Read(Stamp{version, commit, modified, date}, readBuildInfo())

// Version is this binary's version, the one every surface reports: `vigil
// version`, the MCP server's implementation info and the A2A Agent Card.
var Version = current.Version

// Current describes this binary's build.
func Current() Info { return current }

func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo() // nil without build information
	return bi
}

// Read combines a release stamp with the go command's record of the build
// (bi may be nil). A stamped value wins; without one the version is the
// module's as the go command recorded it, or "(devel)", and the commit is
// the revision it stamped (none with -buildvcs=false).
func Read(s Stamp, bi *debug.BuildInfo) Info {
	v := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi != nil {
		v.GoVersion = bi.GoVersion
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				v.Commit = st.Value
			case "vcs.modified":
				v.Modified = st.Value == "true"
			}
		}
	}
	if s.Version != "" {
		v.Version = s.Version
	}
	if s.Commit != "" {
		v.Commit, v.Modified = s.Commit, s.Modified == "true"
	}
	v.Date = s.Date
	return v
}

// Line is the one-line description `vigil version` prints.
func (v Info) Line() string {
	line := "vigil " + v.Version
	if v.Commit != "" {
		line += ", commit " + v.Commit
		if v.Modified {
			line += " (modified)"
		}
	} else {
		line += ", commit unknown (built without version control information)"
	}
	if v.Date != "" {
		line += ", built " + v.Date
	}
	return line + ", " + v.GoVersion
}
