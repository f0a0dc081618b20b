package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/a2aserver"
)

// check verifies the release in out; see the package comment.
func check(ctx context.Context, out string, stdout io.Writer) error {
	data, err := os.ReadFile(filepath.Join(out, "release.json"))
	if err != nil {
		return fmt.Errorf("not a release folder: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("release.json: %w", err)
	}
	if err := checkSums(out, m); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ok  SHA256SUMS matches every archive and SBOM")
	tmp, err := os.MkdirTemp("", "vigil-release-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	binaries := map[platform][]byte{}
	for _, a := range m.Targets {
		p := platform{a.OS, a.Arch}
		bin, err := binaryFromArchive(filepath.Join(out, a.Archive))
		if err != nil {
			return fmt.Errorf("%s: %w", a.Archive, err)
		}
		if sum := sha256.Sum256(bin); hex.EncodeToString(sum[:]) != a.Binary {
			return fmt.Errorf("%s: its vigil is not the binary release.json names", a.Archive)
		}
		path := filepath.Join(tmp, p.os+"-"+p.arch)
		if err := os.WriteFile(path, bin, 0o755); err != nil {
			return err
		}
		if err := checkELF(path, p.arch); err != nil {
			return err
		}
		if err := checkSBOM(filepath.Join(out, a.SBOM), path); err != nil {
			return fmt.Errorf("%s: %w", a.SBOM, err)
		}
		binaries[p] = bin
		fmt.Fprintf(stdout, "ok  %s: static %s binary; its SBOM lists every module linked into it\n", a.Archive, p)
		if emu, ok := emulator(p); ok {
			if err := checkVersionCommand(ctx, path, m, emu...); err != nil {
				return fmt.Errorf("%s: %w", a.Archive, err)
			}
			fmt.Fprintf(stdout, "ok  %s: vigil version reports %s under %s\n", a.Archive, m.Version, emu[0])
		} else if p.os == runtime.GOOS && p.arch == runtime.GOARCH {
			if err := checkRuns(ctx, path, m); err != nil {
				return fmt.Errorf("%s: %w", a.Archive, err)
			}
			fmt.Fprintf(stdout, "ok  %s: vigil version, MCP's serverInfo and the A2A Agent Card report %s\n", a.Archive, m.Version)
		}
	}
	if m.Image == "" {
		return nil
	}
	report, err := checkImage(ctx, filepath.Join(out, m.Image), m, binaries, tmp)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	for _, line := range report {
		fmt.Fprintln(stdout, "ok  image: "+line)
	}
	return nil
}

// checkSums checks SHA256SUMS against the files, and that it lists every
// archive and SBOM release.json names.
func checkSums(out string, m manifest) error {
	data, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		return err
	}
	listed := map[string]string{}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			return fmt.Errorf("SHA256SUMS line %d: %q is not \"SUM  NAME\"", i+1, line)
		}
		listed[name] = sum
	}
	for _, a := range m.Targets {
		for _, name := range []string{a.Archive, a.SBOM} {
			want, ok := listed[name]
			if !ok {
				return fmt.Errorf("SHA256SUMS does not list %s", name)
			}
			got, err := fileSHA256(filepath.Join(out, name))
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("%s: SHA-256 %s, SHA256SUMS says %s", name, got, want)
			}
		}
	}
	return nil
}

// binaryFromArchive reads NAME/vigil out of a release archive.
func binaryFromArchive(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("no vigil binary in the archive")
		}
		if err != nil {
			return nil, err
		}
		if filepath.Base(h.Name) == "vigil" && h.Typeflag == tar.TypeReg {
			if h.Mode&0o111 == 0 {
				return nil, fmt.Errorf("%s is not executable (mode %o)", h.Name, h.Mode)
			}
			return io.ReadAll(tr)
		}
	}
}

// checkSBOM checks that the CycloneDX SBOM lists every module the binary
// was built with (as the go command recorded them in it), at the same
// version.
func checkSBOM(sbomPath, bin string) error {
	data, err := os.ReadFile(sbomPath)
	if err != nil {
		return err
	}
	var bom struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			PURL    string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		return err
	}
	if bom.BOMFormat != "CycloneDX" {
		return fmt.Errorf("bomFormat %q, want CycloneDX", bom.BOMFormat)
	}
	have := map[string]string{}
	for _, c := range bom.Components {
		if path, ok := strings.CutPrefix(c.PURL, "pkg:golang/"); ok {
			path, _, _ = strings.Cut(path, "@")
			have[path] = c.Version
		}
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return err
	}
	if len(bi.Deps) == 0 {
		return errors.New("the binary records no modules")
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		if v, ok := have[d.Path]; !ok || v != d.Version {
			return fmt.Errorf("the binary has %s %s, the SBOM %q", d.Path, d.Version, v)
		}
	}
	return nil
}

// checkRuns runs the binary: `vigil version -o json` must report the
// release's stamp, and a `vigil serve` on loopback must report the same
// version over MCP and in its A2A Agent Card.
func checkRuns(ctx context.Context, bin string, m manifest) error {
	if err := checkVersionCommand(ctx, bin, m); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "vigil-release-serve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "vigil.db"), "--log-format", "json")
	cmd.Env = []string{"HOME=" + dir}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "vigil listening" {
				addr <- line.Addr
			}
		}
		close(addr)
	}()
	var base string
	select {
	case a, ok := <-addr:
		if !ok {
			return errors.New("vigil serve exited before listening")
		}
		base = "http://" + a
	case <-ctx.Done():
		return errors.New("vigil serve did not listen within a minute")
	}
	card, err := agentCardVersion(ctx, base)
	if err != nil {
		return err
	}
	if card != m.Version {
		return fmt.Errorf("the A2A Agent Card says version %q, want %q", card, m.Version)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "vigil-release-check", Version: m.Version}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return fmt.Errorf("MCP initialize: %w", err)
	}
	defer session.Close()
	if info := session.InitializeResult().ServerInfo; info == nil || info.Version != m.Version {
		return fmt.Errorf("MCP serverInfo %+v, want version %q", info, m.Version)
	}
	return nil
}

// emulator is how this machine runs a binary of another architecture:
// Debian's qemu-user-static, when installed.
func emulator(p platform) ([]string, bool) {
	qemuArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[p.arch]
	if p.os != runtime.GOOS || p.arch == runtime.GOARCH || qemuArch == "" {
		return nil, false
	}
	path, err := exec.LookPath("qemu-" + qemuArch + "-static")
	return []string{path}, err == nil
}

// checkVersionCommand checks what `vigil version -o json` reports, run
// directly or under an emulator.
func checkVersionCommand(ctx context.Context, bin string, m manifest, emulator ...string) error {
	argv := append(emulator, bin, "version", "-o", "json")
	out, err := output(ctx, "", nil, argv[0], argv[1:]...)
	if err != nil {
		return err
	}
	var v struct {
		Version, Commit, Date string
		Modified              bool
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return fmt.Errorf("vigil version -o json: %w: %q", err, out)
	}
	if v.Version != m.Version || v.Commit != m.Commit || v.Date != m.Date || v.Modified != m.Modified {
		return fmt.Errorf("vigil version says %+v, the release is %s, commit %s (modified %t), built %s",
			v, m.Version, m.Commit, m.Modified, m.Date)
	}
	return nil
}

func agentCardVersion(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+a2aserver.CardPath, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var card struct{ Version string }
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", a2aserver.CardPath, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		return "", fmt.Errorf("agent card: %w", err)
	}
	return card.Version, nil
}

// checkImage checks the OCI layout: its index.json tags one index, with
// the release's version, of one image per release binary, each configured
// as imageConfig says, running as a non-root user that owns the data
// folder, and holding that binary. The image of this machine's platform
// has its binary taken out of the layer and run.
func checkImage(ctx context.Context, dir string, m manifest, binaries map[platform][]byte, tmp string) ([]string, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations[refNameKey] != m.Version {
		return nil, fmt.Errorf("index.json should name one index tagged %s, names %d", m.Version, len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var report []string
	seen := map[platform]bool{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("manifest %s names no platform", d.Digest)
		}
		p := platform{d.Platform.OS, d.Platform.Architecture}
		bin, ok := binaries[p]
		if !ok || seen[p] {
			return nil, fmt.Errorf("unexpected or repeated platform %s", p)
		}
		seen[p] = true
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if cf.OS != p.os || cf.Architecture != p.arch {
			return nil, fmt.Errorf("%s: its config says %s/%s", p, cf.OS, cf.Architecture)
		}
		uid, err := checkImageConfig(cf.Config, m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		files, err := imageLayerFiles(img)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := checkImageFiles(files, bin, uid); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		line := fmt.Sprintf("%s: entrypoint %s %s, user %s, port %s, volume %s, labels of %s; holds the release binary",
			p, cf.Config.Entrypoint[0], strings.Join(cf.Config.Cmd, " "), cf.Config.User, imagePort, imageDataDir, m.Version)
		emu, emulated := emulator(p)
		if emulated || (p.os == runtime.GOOS && p.arch == runtime.GOARCH) {
			path := filepath.Join(tmp, "from-image-"+p.arch)
			if err := os.WriteFile(path, files[imageBinary].data, 0o755); err != nil {
				return nil, err
			}
			if err := checkVersionCommand(ctx, path, m, emu...); err != nil {
				return nil, fmt.Errorf("%s: the binary taken out of the image: %w", p, err)
			}
			line += ", which runs and reports " + m.Version
		}
		report = append(report, line)
	}
	if len(seen) != len(binaries) {
		return nil, fmt.Errorf("the image has %d platforms, the release %d", len(seen), len(binaries))
	}
	return report, nil
}

var numericUser = regexp.MustCompile(`^([0-9]+)(:[0-9]+)?$`)

// checkImageConfig checks the image's runtime configuration and returns
// the user id it runs as.
func checkImageConfig(c v1.Config, m manifest) (int, error) {
	want := imageConfig(m)
	if !slices.Equal(c.Entrypoint, want.Entrypoint) || !slices.Equal(c.Cmd, want.Cmd) {
		return 0, fmt.Errorf("entrypoint %q and cmd %q, want %q and %q", c.Entrypoint, c.Cmd, want.Entrypoint, want.Cmd)
	}
	// A numeric user: Kubernetes' runAsNonRoot can check only those.
	u := numericUser.FindStringSubmatch(c.User)
	if u == nil {
		return 0, fmt.Errorf("user %q is not numeric", c.User)
	}
	uid, _ := strconv.Atoi(u[1])
	if uid == 0 {
		return 0, errors.New("runs as root")
	}
	if _, ok := c.ExposedPorts[imagePort]; !ok || len(c.ExposedPorts) != 1 {
		return 0, fmt.Errorf("exposes %v, want %s", c.ExposedPorts, imagePort)
	}
	if _, ok := c.Volumes[imageDataDir]; !ok || len(c.Volumes) != 1 {
		return 0, fmt.Errorf("volumes %v, want %s", c.Volumes, imageDataDir)
	}
	for k, v := range want.Labels {
		if c.Labels[k] != v {
			return 0, fmt.Errorf("label %s is %q, want %q", k, c.Labels[k], v)
		}
	}
	if !slices.Contains(c.Env, "VIGIL_DB="+imageDataDir+"/vigil.db") {
		return 0, fmt.Errorf("env %q does not put the SQLite file on the volume", c.Env)
	}
	return uid, nil
}

// imageLayerFiles reads the image's single layer, by absolute path.
func imageLayerFiles(img v1.Image) (map[string]imageFile, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		f := imageFile{name: imageFilePath(h.Name), mode: h.Mode, uid: h.Uid, dir: h.Typeflag == tar.TypeDir}
		if h.Typeflag == tar.TypeReg {
			if f.data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		files[f.name] = f
	}
}

// checkImageFiles checks the layer: the release binary, executable; the
// data folder owned by the image's user and closed to others; the user in
// /etc/passwd; CA certificates.
func checkImageFiles(files map[string]imageFile, bin []byte, uid int) error {
	b, ok := files[imageBinary]
	if !ok || !bytes.Equal(b.data, bin) {
		return fmt.Errorf("%s is missing or not the release binary", imageBinary)
	}
	if b.mode&0o111 != 0o111 {
		return fmt.Errorf("%s has mode %o, not executable by all", imageBinary, b.mode)
	}
	d, ok := files[imageDataDir]
	if !ok || !d.dir || d.uid != uid || d.mode&0o077 != 0 {
		return fmt.Errorf("%s should be a folder owned by %d and closed to others, is %+v", imageDataDir, uid, d)
	}
	if !bytes.Contains(files["/etc/passwd"].data, fmt.Appendf(nil, ":x:%d:%d:", uid, uid)) {
		return fmt.Errorf("/etc/passwd has no entry for user %d", uid)
	}
	if !bytes.Contains(files[imageCABundle].data, []byte("BEGIN CERTIFICATE")) {
		return fmt.Errorf("%s holds no certificate", imageCABundle)
	}
	return nil
}
