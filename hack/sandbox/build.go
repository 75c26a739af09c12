package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"fmgr.dev/hack/internal/ociimage"
)

// The image's name, paths and ports (the devbox contract: manager/sandbox.go).
const (
	imageName  = "flyte-manager-sandbox"
	binaryPath = "/usr/local/bin/flyte-manager"
)

// result is what build wrote.
type result struct {
	ref    string
	digest v1.Hash // the image's manifest digest
	size   int64   // compressed
	layout string
	image  v1.Image
}

// build assembles the image from the cached root filesystem and a freshly
// compiled manager, and writes it under o.out.
func build(ctx context.Context, o options, log io.Writer) (result, error) {
	plat := &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	wheelDir, err := wheels(ctx, o, log)
	if err != nil {
		return result{}, err
	}
	rootfs, err := rootfsLayer(ctx, o, wheelDir, log)
	if err != nil {
		return result{}, err
	}
	base, err := tarball.LayerFromFile(rootfs, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return result{}, err
	}
	tmp, err := os.MkdirTemp("", "fm-sandbox-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "flyte-manager")
	if err := ociimage.Compile(ctx, o.goCmd, o.root, o.version, o.revision, plat, bin); err != nil {
		return result{}, err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return result{}, err
	}
	var files ociimage.Files
	files.Dir("usr/", 0o755, 0)
	files.Dir("usr/local/", 0o755, 0)
	files.Dir("usr/local/bin/", 0o755, 0)
	files.File(binaryPath[1:], 0o755, 0, binary)
	for _, d := range []string{"var/", "var/lib/", "var/lib/flyte/", "var/lib/flyte/storage/", "var/lib/flyte/config/", ".kube/"} {
		files.Dir(d, 0o755, 0)
	}
	top, err := files.Layer(o.epoch)
	if err != nil {
		return result{}, err
	}
	img, err := imageOf(o, plat, base, top)
	if err != nil {
		return result{}, err
	}
	res := result{ref: imageName + ":" + o.version, image: img}
	if res.digest, err = img.Digest(); err != nil {
		return result{}, err
	}
	if res.size, err = ociimage.Size(img); err != nil {
		return result{}, err
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	out := ociimage.Output{Dir: o.out, Name: imageName, Version: o.version, Epoch: o.epoch, DockerTars: true}
	if err := ociimage.Write(out, idx, []ociimage.PlatformImage{{Platform: plat, Image: img}}, log); err != nil {
		return result{}, err
	}
	res.layout = filepath.Join(o.out, "oci")
	return res, nil
}

// imageOf is the image: the root filesystem, the manager's layer, and a
// config that starts `flyte-manager sandbox` under tini as root (tasks run
// as local processes of the manager, as in the embedded default).
func imageOf(o options, p *v1.Platform, base, top v1.Layer) (v1.Image, error) {
	created := v1.Time{Time: o.epoch}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: fmt.Sprintf("hack/sandbox: mmdebstrap --variant=minbase %s (%s), venv %s with %s", o.suite, packages, venvDir, strings.Join(requirements(o), " ")), Comment: "rootfs"}},
		mutate.Addendum{Layer: top, History: v1.History{Created: created, CreatedBy: "hack/sandbox: go build -trimpath ./manager (CGO_ENABLED=0)", Comment: "flyte-manager"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	cf.Created = created
	labels := map[string]string{
		"org.opencontainers.image.title":    imageName,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
		"org.opencontainers.image.created":  o.epoch.Format(time.RFC3339),
	}
	cf.Config = v1.Config{
		Entrypoint: []string{"/usr/bin/tini", "--", binaryPath},
		Cmd:        []string{"sandbox", "--python", venvDir + "/bin"},
		WorkingDir: "/",
		Env: []string{
			"PATH=" + venvDir + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=/root",
			"LANG=C.UTF-8",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		ExposedPorts: map[string]struct{}{"30080/tcp": {}, "6443/tcp": {}, "30002/tcp": {}, "30081/tcp": {}},
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}
