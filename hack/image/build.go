package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"fmgr.dev/hack/internal/ociimage"
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
	var images []ociimage.PlatformImage
	for _, p := range o.platforms {
		plat, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil || plat.OS != "linux" || plat.Architecture == "" {
			return result{}, fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		bin := filepath.Join(tmp, "flyte-manager-"+plat.Architecture)
		if err := ociimage.Compile(ctx, o.goCmd, o.root, o.version, o.revision, plat, bin); err != nil {
			return result{}, err
		}
		img, err := platformImageOf(o, plat, base, bin)
		if err != nil {
			return result{}, err
		}
		size, err := ociimage.Size(img)
		if err != nil {
			return result{}, err
		}
		d, err := img.Digest()
		if err != nil {
			return result{}, err
		}
		ociimage.Logf(log, "image %s: %s, %.1f MB compressed", plat, d, float64(size)/1e6)
		images = append(images, ociimage.PlatformImage{Platform: plat, Image: img})
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	idx = mutate.Annotations(idx, labels(o)).(v1.ImageIndex)
	res := result{ref: config.ImageName + ":" + o.version, index: idx}
	if res.digest, err = idx.Digest(); err != nil {
		return result{}, err
	}
	if err := ociimage.Write(ociimage.Output{Dir: o.out, Name: config.ImageName, Version: o.version, Epoch: o.epoch, DockerTars: o.dockerTars}, idx, images, log); err != nil {
		return result{}, err
	}
	res.layout = filepath.Join(o.out, "oci")
	return res, nil
}

// platformImageOf is the image for one platform: the shared base layer, the
// binary's layer, and a config naming the entrypoint, user and labels.
func platformImageOf(o options, p *v1.Platform, base v1.Layer, bin string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	files := ociimage.Files{UserName: userName}
	files.Dir("usr/", 0o755, 0)
	files.Dir("usr/local/", 0o755, 0)
	files.Dir("usr/local/bin/", 0o755, 0)
	files.File(strings.TrimPrefix(binaryPath, "/"), 0o755, 0, binary)
	binLayer, err := files.Layer(o.epoch)
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
	files := ociimage.Files{UserName: userName}
	files.Dir("etc/", 0o755, 0)
	files.File("etc/passwd", 0o644, 0, []byte(fmt.Sprintf(
		"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, uid, uid, userName, userHome)))
	files.File("etc/group", 0o644, 0, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)))
	files.File("etc/nsswitch.conf", 0o644, 0, []byte("hosts: files dns\n"))
	files.Dir("etc/ssl/", 0o755, 0)
	files.Dir("etc/ssl/certs/", 0o755, 0)
	files.File(strings.TrimPrefix(caPath, "/"), 0o644, 0, ca)
	files.Dir("home/", 0o755, 0)
	files.Dir(strings.TrimPrefix(userHome, "/")+"/", 0o700, uid)
	files.Dir("tmp/", 0o1777, 0)
	files.Dir("var/", 0o755, 0)
	files.Dir("var/lib/", 0o755, 0)
	files.Dir(strings.TrimPrefix(managerHome, "/")+"/", 0o700, uid)
	return files.Layer(o.epoch)
}
