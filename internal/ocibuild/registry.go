// Package ocibuild builds the SDK's ImageSpec as an OCI image without a
// container runtime and pushes it to a registry: the kubernetes executor's
// image builds (docs/images.md, Kubernetes mode). The base image is pulled
// from its registry; the package layers are installed with uv into one
// directory that becomes a layer; copied files become layers; env and
// workdir go into the image's config. Layers that need to run something in
// the image (apt packages, commands) cannot be built without a runtime and
// fail their build, named.
//
// registry.go names images and finds them in the registry; build.go
// builds; pod.go is `flyte-manager image build-spec`, the build's Pod.
package ocibuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/images"
)

// Registry is where built images go: a registry and repository prefix
// (registry.example:5000/flyte), reached over plain http when Insecure,
// with the credentials of a docker config directory.
type Registry struct {
	Prefix   string
	Insecure bool
	// DockerConfig is the directory of config.json; "" is $DOCKER_CONFIG,
	// else ~/.docker.
	DockerConfig string
}

// FQIN is the fully qualified name of the SDK's target image: a target
// that names a registry of its own (the image's registry in the SDK) is
// kept; a bare name:tag goes under the prefix.
func (r Registry) FQIN(target string) string {
	if first, _, ok := strings.Cut(target, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return target
	}
	return strings.TrimSuffix(r.Prefix, "/") + "/" + target
}

func (r Registry) nameOptions() []name.Option {
	if r.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// ref parses an image reference (tag or digest).
func (r Registry) ref(s string) (name.Reference, error) {
	return name.ParseReference(s, r.nameOptions()...)
}

func (r Registry) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(dockerConfig{dir: r.DockerConfig})}
}

// Lookup answers the fqin of the image the SDK calls name (name:tag) when
// the registry has its manifest; errs.ErrNotFound when it does not.
func (r Registry) Lookup(ctx context.Context, image string) (string, error) {
	fqin := r.FQIN(image)
	ref, err := r.ref(fqin)
	if err != nil {
		return "", errs.Invalidf("image %.80q is not an image reference", image)
	}
	if _, err := remote.Head(ref, r.remoteOptions(ctx)...); err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return "", errs.NotFoundf("image %s is not in the registry", fqin)
		}
		return "", fmt.Errorf("the image registry cannot be reached to look %s up: %w", fqin, errs.ErrUnavailable)
	}
	return fqin, nil
}

// Find is Lookup for GetImage (imagebuilder.Finder); the registry does
// not say which run built an image.
func (r Registry) Find(ctx context.Context, image string) (string, images.BuildRun, error) {
	fqin, err := r.Lookup(ctx, image)
	return fqin, images.BuildRun{}, err
}

// dockerConfig is the keychain of a docker config.json: the auths entry
// of the registry's host, anonymous without one.
type dockerConfig struct{ dir string }

func (k dockerConfig) Resolve(res authn.Resource) (authn.Authenticator, error) {
	dir := k.dir
	if dir == "" {
		dir = os.Getenv("DOCKER_CONFIG")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return authn.Anonymous, nil
		}
		dir = filepath.Join(home, ".docker")
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return authn.Anonymous, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the registry credentials: %w", err)
	}
	var cfg struct {
		Auths map[string]authn.AuthConfig `json:"auths"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("the registry credentials in %s are not a docker config.json", dir)
	}
	host := res.RegistryStr()
	for _, key := range []string{host, "https://" + host, "http://" + host, "https://" + host + "/v1/"} {
		if a, ok := cfg.Auths[key]; ok {
			return authn.FromConfig(a), nil
		}
	}
	if host == name.DefaultRegistry {
		if a, ok := cfg.Auths["https://index.docker.io/v1/"]; ok {
			return authn.FromConfig(a), nil
		}
	}
	return authn.Anonymous, nil
}
