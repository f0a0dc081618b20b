// Command release builds vigil's release artifacts and checks them.
//
//	go run ./internal/release [-version vX.Y.Z] [-out dist]
//	go run ./internal/release check [-out dist]
//
// The build makes, in -out: a statically linked binary for each Linux
// target in a .tar.gz with the licence, the README and the systemd unit; a
// CycloneDX SBOM per target; an OCI image layout holding a multi-platform
// image (image/); SHA256SUMS over the archives and SBOMs; release.json,
// what was built. check verifies such a folder: the checksums, that each
// binary is static and of its architecture, that the binary of this
// machine's architecture reports the release's version on the command
// line, over MCP and in the A2A Agent Card, that each SBOM lists every
// module linked into its binary, and the image's configuration and
// contents, running the binary found inside it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "release:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cmd := "build"
	if len(args) > 0 && (args[0] == "build" || args[0] == "check") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("release "+cmd, flag.ContinueOnError)
	out := fs.String("out", "dist", "the release folder")
	switch cmd {
	case "check":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("check takes no arguments, got %q", fs.Args())
		}
		return check(ctx, *out, stdout)
	default:
		var o buildOptions
		fs.StringVar(&o.version, "version", "", "the version to stamp (default: the tag at HEAD, else a pseudo-version of HEAD)")
		fs.StringVar(&o.targets, "targets", defaultTargets, "comma-separated GOOS/GOARCH pairs")
		fs.StringVar(&o.sbomTool, "cyclonedx-gomod", "", "path of cyclonedx-gomod (default: built once into the user's cache folder)")
		fs.BoolVar(&o.noImage, "no-image", false, "skip the container image")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected arguments %q", fs.Args())
		}
		o.out = *out
		return build(ctx, o, stdout)
	}
}
