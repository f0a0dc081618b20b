package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image is built FROM scratch: the static binary, CA certificates
// (for PostgreSQL over TLS and webhooks to https URLs), a passwd entry for
// the user it runs as, and the folder its SQLite file lives in, a volume.
const (
	imageBinary   = "/usr/local/bin/vigil"
	imageDataDir  = "/var/lib/vigil"
	imageUID      = 65532 // the conventional non-root id of distroless images
	imagePort     = "7317/tcp"
	imageCABundle = "/etc/ssl/certs/ca-certificates.crt"
	// hostCABundle is where Debian's ca-certificates package puts the
	// bundle the image copies.
	hostCABundle = "/etc/ssl/certs/ca-certificates.crt"
	refNameKey   = "org.opencontainers.image.ref.name"
)

// imageConfig is the runtime configuration of the image of version m.
// SQLite is the default (VIGIL_DB names a file on the volume); pass
// VIGIL_DB=postgres://… (or --db) for PostgreSQL. It listens on every
// interface, so vigil serve starts only once tokens are configured.
func imageConfig(m manifest) v1.Config {
	return v1.Config{
		Entrypoint: []string{imageBinary},
		Cmd:        []string{"serve"},
		User:       fmt.Sprintf("%d:%d", imageUID, imageUID),
		WorkingDir: imageDataDir,
		Env: []string{
			"PATH=/usr/local/bin",
			"HOME=" + imageDataDir,
			"VIGIL_DB=" + imageDataDir + "/vigil.db",
			"VIGIL_ADDR=0.0.0.0:7317",
		},
		ExposedPorts: map[string]struct{}{imagePort: {}},
		Volumes:      map[string]struct{}{imageDataDir: {}},
		StopSignal:   "SIGTERM",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "vigil",
			"org.opencontainers.image.description": "session state awareness for multi-agent systems",
			"org.opencontainers.image.version":     m.Version,
			"org.opencontainers.image.revision":    m.Commit,
			"org.opencontainers.image.created":     m.Date,
			"org.opencontainers.image.source":      "https://github.com/vigilhq/vigil",
			"org.opencontainers.image.licenses":    "MIT",
		},
	}
}

// imageFile is one entry of the image's only layer.
type imageFile struct {
	name string // absolute path in the image
	mode int64
	uid  int
	data []byte // nil for a folder
	dir  bool
}

// imageFiles lists the layer's entries, folders before what they hold.
func imageFiles(binary, caBundle []byte) []imageFile {
	dir := func(name string, mode int64, uid int) imageFile {
		return imageFile{name: name, mode: mode, uid: uid, dir: true}
	}
	file := func(name string, mode int64, data []byte) imageFile {
		return imageFile{name: name, mode: mode, data: data}
	}
	return []imageFile{
		dir("/etc", 0o755, 0),
		file("/etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nvigil:x:%d:%d:vigil:%s:/sbin/nologin\n", imageUID, imageUID, imageDataDir)),
		file("/etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nvigil:x:%d:\n", imageUID)),
		dir("/etc/ssl", 0o755, 0),
		dir("/etc/ssl/certs", 0o755, 0),
		file(imageCABundle, 0o644, caBundle),
		dir("/tmp", 0o1777, 0),
		dir("/usr", 0o755, 0),
		dir("/usr/local", 0o755, 0),
		dir("/usr/local/bin", 0o755, 0),
		file(imageBinary, 0o755, binary),
		dir("/var", 0o755, 0),
		dir("/var/lib", 0o755, 0),
		dir(imageDataDir, 0o700, imageUID),
	}
}

// layerTar is the uncompressed layer: every entry dated with the build
// and owned by root but the data folder.
func layerTar(files []imageFile, date time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name[1:], Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: date, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// platformImage is the image of one platform, around its binary.
func platformImage(p platform, m manifest, binary, caBundle []byte) (v1.Image, error) {
	date, err := time.Parse(time.RFC3339, m.Date)
	if err != nil {
		return nil, err
	}
	data, err := layerTar(imageFiles(binary, caBundle), date)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.arch,
		OS:           p.os,
		Created:      v1.Time{Time: date},
		Config:       imageConfig(m),
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: v1.History{
		Created:   v1.Time{Time: date},
		CreatedBy: "go run ./internal/release: vigil " + m.Version + ", CA certificates, user vigil",
		Comment:   "FROM scratch",
	}})
}

// writeImage writes an OCI layout at dir whose index.json names, with the
// release's version as its tag, one multi-platform index of an image per
// binary.
func writeImage(dir string, m manifest, binaries map[platform]string) error {
	caBundle, err := os.ReadFile(hostCABundle)
	if err != nil {
		return fmt.Errorf("the image carries this machine's CA certificates (Debian: apt-get install ca-certificates): %w", err)
	}
	var ps []platform
	for p := range binaries {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b platform) int { return cmp.Compare(a.String(), b.String()) })
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range ps {
		binary, err := os.ReadFile(binaries[p])
		if err != nil {
			return err
		}
		img, err := platformImage(p, m, binary, caBundle)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: p.os, Architecture: p.arch},
		}})
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameKey: m.Version}))
}

// imageFilePath is where a layer entry lives in the image, as tar names it.
func imageFilePath(name string) string { return "/" + path.Clean(name) }
