package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// defaultTargets are the platforms a release ships. darwin is not among
// them: the SQLite driver needs cgo, and cgo for macOS needs Apple's SDK,
// which no Debian package carries (docs/operations.md).
const defaultTargets = "linux/amd64,linux/arm64"

// buildTags make the binary static without surprises: the pure Go DNS
// resolver and user lookup (glibc's need its shared NSS modules at run
// time), and SQLite without extension loading (dlopen, the same).
var buildTags = []string{"netgo", "osusergo", "sqlite_omit_load_extension"}

// sbomToolVersion is the cyclonedx-gomod release the SBOMs are made with.
const sbomToolVersion = "v1.10.0"

const stampPackage = "github.com/vigilhq/vigil/internal/buildinfo"

type buildOptions struct {
	out, version, targets, sbomTool string
	noImage                         bool
}

// manifest is release.json: what a build made, for check and for people.
type manifest struct {
	Version  string     `json:"version"`
	Commit   string     `json:"commit"`
	Modified bool       `json:"modified"`
	Date     string     `json:"date"`
	Go       string     `json:"go"`
	Targets  []artifact `json:"targets"`
	Image    string     `json:"image,omitempty"` // the OCI layout's folder
}

type artifact struct {
	OS      string `json:"os"`
	Arch    string `json:"arch"`
	Archive string `json:"archive"`
	SBOM    string `json:"sbom"`
	// Binary is the vigil binary's SHA-256, to find it again in the image.
	Binary string `json:"binarySha256"`
}

type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

// crossCompilers are Debian's C cross compilers, by GOARCH.
var crossCompilers = map[string]struct{ cc, pkg string }{
	"amd64": {"x86_64-linux-gnu-gcc", "gcc-x86-64-linux-gnu"},
	"arm64": {"aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"},
}

// semverish is a version that can name files and image tags: v, three
// numbers, then optional pre-release and build parts.
var semverish = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func parseTargets(s string) ([]platform, error) {
	var ps []platform
	for _, t := range strings.Split(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(t), "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("target %q: want GOOS/GOARCH, like linux/arm64", t)
		}
		if goos != "linux" {
			return nil, fmt.Errorf("target %s: only linux is built here: the SQLite driver needs cgo, and cgo for %s needs that system's own SDK; build it there with go build ./cmd/vigil", t, goos)
		}
		if _, ok := crossCompilers[goarch]; !ok {
			return nil, fmt.Errorf("target %s: no C compiler known for %s (known: amd64, arm64)", t, goarch)
		}
		ps = append(ps, platform{goos, goarch})
	}
	return ps, nil
}

func build(ctx context.Context, o buildOptions, stdout io.Writer) (err error) {
	targets, err := parseTargets(o.targets)
	if err != nil {
		return err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	m, err := stamp(ctx, root, o.version)
	if err != nil {
		return err
	}
	out, err := prepareOut(o.out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(out) // no half release to mistake for a whole one
		}
	}()
	fmt.Fprintf(stdout, "vigil %s, commit %s, built %s, into %s\n", m.Version, m.Commit, m.Date, out)
	sbomTool, err := ensureSBOMTool(ctx, o.sbomTool, stdout)
	if err != nil {
		return err
	}
	binaries := map[platform]string{}
	for _, p := range targets {
		start := time.Now()
		fmt.Fprintf(stdout, "building %s (the first build of a platform compiles SQLite's C source: minutes)\n", p)
		bin, err := goBuild(ctx, root, out, p, m)
		if err != nil {
			return err
		}
		if err := checkELF(bin, p.arch); err != nil {
			return err
		}
		binaries[p] = bin
		a, err := archive(root, out, p, m, bin)
		if err != nil {
			return err
		}
		if a.SBOM, err = sbom(ctx, sbomTool, out, p, m, bin); err != nil {
			return err
		}
		m.Targets = append(m.Targets, a)
		fi, _ := os.Stat(filepath.Join(out, a.Archive))
		fmt.Fprintf(stdout, "  %s (%.1f MB) and %s in %s\n", a.Archive, float64(fi.Size())/1e6, a.SBOM, time.Since(start).Round(time.Second))
	}
	if !o.noImage {
		m.Image = "image"
		if err := writeImage(filepath.Join(out, m.Image), m, binaries); err != nil {
			return fmt.Errorf("image: %w", err)
		}
		fmt.Fprintf(stdout, "image: OCI layout in %s, tag %s\n", filepath.Join(out, m.Image), m.Version)
	}
	for _, p := range targets {
		os.RemoveAll(filepath.Dir(binaries[p]))
	}
	if err := writeChecksums(out, m); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "release.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "done: %s (check it with go run ./internal/release check -out %s)\n", filepath.Join(out, "SHA256SUMS"), o.out)
	return nil
}

// moduleRoot is the folder of vigil's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := output(ctx, "", nil, "go", "env", "GOMOD")
	if err != nil {
		return "", err
	}
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside vigil's module: run from the repository")
	}
	return filepath.Dir(gomod), nil
}

// stamp reads what the binaries are stamped with from git: the version
// (given, the tag at HEAD, or a pseudo-version of HEAD's commit time), the
// commit, whether the tree differs from it, and the build date
// (SOURCE_DATE_EPOCH when set, for reproducible builds; now otherwise).
func stamp(ctx context.Context, root, version string) (manifest, error) {
	m := manifest{Version: version, Go: runtime.Version()}
	var err error
	if m.Commit, err = output(ctx, root, nil, "git", "rev-parse", "HEAD"); err != nil {
		return m, fmt.Errorf("the release is stamped with its commit: %w", err)
	}
	status, err := output(ctx, root, nil, "git", "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return m, err
	}
	m.Modified = status != ""
	if m.Version == "" {
		if tag, err := output(ctx, root, nil, "git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD"); err == nil && !m.Modified {
			m.Version = tag
		} else {
			ct, err := output(ctx, root, nil, "git", "show", "-s", "--format=%ct", "HEAD")
			if err != nil {
				return m, err
			}
			secs, err := strconv.ParseInt(ct, 10, 64)
			if err != nil {
				return m, fmt.Errorf("commit time %q: %w", ct, err)
			}
			m.Version = "v0.0.0-" + time.Unix(secs, 0).UTC().Format("20060102150405") + "-" + m.Commit[:12]
		}
	}
	if !semverish.MatchString(m.Version) {
		return m, fmt.Errorf("version %q: want v1.2.3, optionally with -pre-release and +build parts", m.Version)
	}
	date := time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		secs, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return m, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		date = time.Unix(secs, 0).UTC()
	}
	m.Date = date.Format(time.RFC3339)
	return m, nil
}

// prepareOut empties the release folder: a folder holding an earlier
// release (its release.json) is emptied, any other non-empty one refused.
func prepareOut(out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", err
	case len(entries) == 0:
	default:
		if _, err := os.Stat(filepath.Join(abs, "release.json")); err != nil {
			return "", fmt.Errorf("%s is not empty and holds no earlier release: choose another -out", out)
		}
		if err := os.RemoveAll(abs); err != nil {
			return "", err
		}
	}
	return abs, os.MkdirAll(abs, 0o755)
}

func cacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("a folder for built tools: %w", err)
	}
	return filepath.Join(dir, "vigil-ci"), nil
}

// ensureSBOMTool returns the SBOM generator, building it from the Go
// module proxy into the cache folder the first time.
func ensureSBOMTool(ctx context.Context, given string, stdout io.Writer) (string, error) {
	if given != "" {
		return given, nil
	}
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "cyclonedx-gomod-"+sbomToolVersion)
	tool := filepath.Join(dir, "cyclonedx-gomod")
	if _, err := os.Stat(tool); err == nil {
		return tool, nil
	}
	fmt.Fprintf(stdout, "building cyclonedx-gomod %s into %s (once)\n", sbomToolVersion, dir)
	if _, err := output(ctx, "", []string{"GOBIN=" + dir, "GOFLAGS="}, "go", "install",
		"github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@"+sbomToolVersion); err != nil {
		return "", err
	}
	return tool, nil
}

func ldflags(m manifest) string {
	modified := ""
	if m.Modified {
		modified = "true"
	}
	x := func(name, value string) string { return "-X " + stampPackage + "." + name + "=" + value }
	return strings.Join([]string{"-s -w", x("version", m.Version), x("commit", m.Commit), x("modified", modified),
		x("date", m.Date), `-linkmode external -extldflags "-static"`}, " ")
}

// compilerFor is the C compiler for arch: the machine's own for its own
// architecture, Debian's cross compiler otherwise.
func compilerFor(arch string) (string, error) {
	if arch == runtime.GOARCH {
		return "", nil // cgo's default, cc
	}
	c := crossCompilers[arch]
	if _, err := exec.LookPath(c.cc); err != nil {
		return "", fmt.Errorf("linux/%s needs the C cross compiler %s (Debian: apt-get install %s)", arch, c.cc, c.pkg)
	}
	return c.cc, nil
}

func goBuild(ctx context.Context, root, out string, p platform, m manifest) (string, error) {
	cc, err := compilerFor(p.arch)
	if err != nil {
		return "", err
	}
	env := []string{"CGO_ENABLED=1", "GOOS=" + p.os, "GOARCH=" + p.arch}
	if cc != "" {
		env = append(env, "CC="+cc)
	}
	bin := filepath.Join(out, ".build-"+p.os+"-"+p.arch, "vigil")
	_, err = output(ctx, root, env, "go", "build", "-trimpath", "-tags", strings.Join(buildTags, ","),
		"-ldflags", ldflags(m), "-o", bin, "./cmd/vigil")
	return bin, err
}

// elfMachines are the ELF machine of each GOARCH.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkELF checks that bin is a static executable for arch: no program
// interpreter and no shared library needed.
func checkELF(bin, arch string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	defer f.Close()
	if want := elfMachines[arch]; f.Machine != want {
		return fmt.Errorf("%s: built for %s, want %s", bin, f.Machine, want)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it names a program interpreter)", bin)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %v", bin, libs)
	}
	return nil
}

func baseName(p platform, m manifest) string {
	return "vigil_" + m.Version + "_" + p.os + "_" + p.arch
}

// archive writes NAME.tar.gz holding NAME/ with the binary, the licence,
// the README and the systemd unit, every entry dated with the build.
func archive(root, out string, p platform, m manifest, bin string) (artifact, error) {
	a := artifact{OS: p.os, Arch: p.arch}
	name := baseName(p, m)
	a.Archive = name + ".tar.gz"
	date, _ := time.Parse(time.RFC3339, m.Date)
	files := []struct{ src, dst string }{
		{bin, "vigil"},
		{filepath.Join(root, "LICENSE"), "LICENSE"},
		{filepath.Join(root, "README.md"), "README.md"},
		{filepath.Join(root, "deploy", "systemd", "vigil.service"), "vigil.service"},
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: date, Format: tar.FormatPAX}); err != nil {
		return a, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f.src)
		if err != nil {
			return a, err
		}
		mode := int64(0o644)
		if f.dst == "vigil" {
			mode = 0o755
			sum := sha256.Sum256(data)
			a.Binary = hex.EncodeToString(sum[:])
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name + "/" + f.dst, Mode: mode, Size: int64(len(data)),
			ModTime: date, Format: tar.FormatPAX}); err != nil {
			return a, err
		}
		if _, err := tw.Write(data); err != nil {
			return a, err
		}
	}
	if err := tw.Close(); err != nil {
		return a, err
	}
	if err := zw.Close(); err != nil {
		return a, err
	}
	return a, os.WriteFile(filepath.Join(out, a.Archive), buf.Bytes(), 0o644)
}

// sbom writes a CycloneDX SBOM of the binary of platform p, from the
// modules the go command recorded in it ("go version -m"): exactly what
// was linked in, whatever the checkout's git state. Without a serial
// number or a timestamp, a rebuild of the same commit gives the same SBOM,
// as it gives the same binaries.
func sbom(ctx context.Context, tool, out string, p platform, m manifest, bin string) (string, error) {
	name := baseName(p, m) + ".cdx.json"
	_, err := output(ctx, "", nil, tool, "bin", "-json", "-noserial", "-notimestamp", "-version", m.Version,
		"-output", filepath.Join(out, name), bin)
	return name, err
}

// writeChecksums writes SHA256SUMS in the format `sha256sum -c` reads.
func writeChecksums(out string, m manifest) error {
	var names []string
	for _, a := range m.Targets {
		names = append(names, a.Archive, a.SBOM)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		sum, err := fileSHA256(filepath.Join(out, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(b.String()), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// output runs a command and returns its trimmed standard output; a
// failure's error carries the command and what it printed on stderr.
func output(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
