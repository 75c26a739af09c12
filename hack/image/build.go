package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"fmgr.dev/internal/config"
)

// The image's user, paths and environment.
const (
	uid         = 65532
	userName    = "nonroot"
	userHome    = "/home/nonroot"
	managerHome = "/var/lib/flyte-manager" // FLYTE_MANAGER_HOME: the embedded default's data dir
	binaryPath  = "/usr/local/bin/flyte-manager"
	caPath      = "/etc/ssl/certs/ca-certificates.crt"
	listenPort  = "8090/tcp"
)

// result is what build wrote.
type result struct {
	ref    string  // name:version
	digest v1.Hash // the image index's digest
	layout string  // the OCI layout directory
	index  v1.ImageIndex
}

// build compiles the manager for each platform, assembles the images and
// their index, and writes them under o.out.
func build(ctx context.Context, o options, log io.Writer) (result, error) {
	if len(o.platforms) == 0 {
		return result{}, errors.New("no platforms")
	}
	base, err := baseLayer(o)
	if err != nil {
		return result{}, err
	}
	tmp, err := os.MkdirTemp("", "fm-image-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var images []platformImage
	for _, p := range o.platforms {
		plat, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil || plat.OS != "linux" || plat.Architecture == "" {
			return result{}, fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		bin := filepath.Join(tmp, "flyte-manager-"+plat.Architecture)
		if err := compile(ctx, o, plat, bin); err != nil {
			return result{}, err
		}
		img, err := platformImageOf(o, plat, base, bin)
		if err != nil {
			return result{}, err
		}
		size, err := imageSize(img)
		if err != nil {
			return result{}, err
		}
		d, err := img.Digest()
		if err != nil {
			return result{}, err
		}
		logf(log, "image %s: %s, %.1f MB compressed", plat, d, float64(size)/1e6)
		images = append(images, platformImage{plat: plat, img: img})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	idx = mutate.Annotations(idx, labels(o)).(v1.ImageIndex)
	res := result{ref: config.ImageName + ":" + o.version, index: idx}
	if res.digest, err = idx.Digest(); err != nil {
		return result{}, err
	}
	if err := write(o, res.ref, idx, images, log); err != nil {
		return result{}, err
	}
	res.layout = filepath.Join(o.out, "oci")
	return res, nil
}

// platformImage is one platform's image.
type platformImage struct {
	plat *v1.Platform
	img  v1.Image
}

// compile builds the static manager for one platform.
func compile(ctx context.Context, o options, p *v1.Platform, out string) error {
	ldflags := fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s", o.version, o.revision)
	cmd := exec.CommandContext(ctx, o.goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./manager")
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=")
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %v\n%s", p, err, b)
	}
	return nil
}

// platformImageOf is the image for one platform: the shared base layer, the
// binary's layer, and a config naming the entrypoint, user and labels.
func platformImageOf(o options, p *v1.Platform, base v1.Layer, bin string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var files tarFiles
	files.dir("usr/", 0o755, 0)
	files.dir("usr/local/", 0o755, 0)
	files.dir("usr/local/bin/", 0o755, 0)
	files.file(strings.TrimPrefix(binaryPath, "/"), 0o755, 0, binary)
	binLayer, err := files.layer(o.epoch)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.epoch}, CreatedBy: "hack/image: CA certificates, /etc/passwd, the user's home and data dirs", Comment: "base"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: o.epoch}, CreatedBy: "hack/image: go build -trimpath ./manager (CGO_ENABLED=0)", Comment: "flyte-manager"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: o.epoch}
	cf.Author = ""
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"start"},
		WorkingDir: managerHome,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=" + userHome,
			"SSL_CERT_FILE=" + caPath,
			"FLYTE_MANAGER_HOME=" + managerHome,
			// In a container the loopback default would be unreachable.
			"FLYTE_MANAGER_SERVER_HOST=0.0.0.0",
		},
		ExposedPorts: map[string]struct{}{listenPort: {}},
		Labels:       labels(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(o)).(v1.Image), nil
}

// labels are the OCI annotations of the image, its config and its index.
func labels(o options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    config.ImageName,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.created":  o.epoch.Format(time.RFC3339),
	}
	if o.source != "" {
		l["org.opencontainers.image.source"] = o.source
	}
	return l
}

// baseLayer holds what every platform shares: CA certificates, the user
// and group files, /tmp, the user's home and the manager's data dir.
func baseLayer(o options) (v1.Layer, error) {
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	var files tarFiles
	files.dir("etc/", 0o755, 0)
	files.file("etc/passwd", 0o644, 0, []byte(fmt.Sprintf(
		"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, uid, uid, userName, userHome)))
	files.file("etc/group", 0o644, 0, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)))
	files.file("etc/nsswitch.conf", 0o644, 0, []byte("hosts: files dns\n"))
	files.dir("etc/ssl/", 0o755, 0)
	files.dir("etc/ssl/certs/", 0o755, 0)
	files.file(strings.TrimPrefix(caPath, "/"), 0o644, 0, ca)
	files.dir("home/", 0o755, 0)
	files.dir(strings.TrimPrefix(userHome, "/")+"/", 0o700, uid)
	files.dir("tmp/", 0o1777, 0)
	files.dir("var/", 0o755, 0)
	files.dir("var/lib/", 0o755, 0)
	files.dir(strings.TrimPrefix(managerHome, "/")+"/", 0o700, uid)
	return files.layer(o.epoch)
}

// tarFiles collects a layer's entries in the order they are added.
type tarFiles struct {
	entries []tarEntry
}

type tarEntry struct {
	hdr  tar.Header
	body []byte
}

func (f *tarFiles) dir(name string, mode int64, owner int) {
	f.entries = append(f.entries, tarEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner}})
}

func (f *tarFiles) file(name string, mode int64, owner int, body []byte) {
	f.entries = append(f.entries, tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Uid: owner, Gid: owner, Size: int64(len(body))}, body: body})
}

// layer writes the entries as a gzipped tar with every mtime at epoch, once,
// so that the layer's bytes (and digest) depend on nothing else.
func (f *tarFiles) layer(epoch time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, e := range f.entries {
		h := e.hdr
		h.ModTime = epoch
		if h.Uid != 0 {
			h.Uname, h.Gname = userName, userName
		} else {
			h.Uname, h.Gname = "root", "root"
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// imageSize is what pulling the image transfers: its config and compressed
// layers.
func imageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	n := m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
