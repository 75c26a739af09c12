// Package imagebuilder serves flyteidl2.imagebuilder.ImageService: the
// SDK's remote builder asks it whether an image is built before it runs the
// built-in build-image task (internal/images). Without an image store (the
// kubernetes executor builds no images yet) every image is not found, and
// the SDK finds no build-image task either: it says the builder is not
// enabled. The local executor finds images among its Python environments
// (images.Store), the kubernetes executor in its registry
// (ocibuild.Registry).
package imagebuilder

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/common"
	ib "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	"fmgr.dev/gen/go/flyteidl2/imagebuilder/imagebuilderconnect"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/images"
	"fmgr.dev/internal/server"
)

// maxName bounds an image name (a registry reference is at most 255
// characters in the distribution spec; the tag adds 128).
const maxName = 512

// Finder finds a built image by the SDK's name:tag: its fqin and the run
// that built it (zero when unknown), errs.ErrNotFound when it is not built.
type Finder interface {
	Find(ctx context.Context, name string) (fqin string, run images.BuildRun, err error)
}

// Service answers GetImage from where this manager's builds go.
type Service struct {
	store Finder // nil: no images are built here
}

// Setup mounts the service; f may be nil.
func Setup(srv *server.Server, f Finder) error {
	return srv.Mount(server.NewService(imagebuilderconnect.NewImageServiceHandler(&Service{store: f}, srv.HandlerOptions()...)))
}

// GetImage returns the fully qualified name of a built image, by the
// name:tag the SDK computed for it; NotFound when it is not built (the
// SDK then builds it).
func (s *Service) GetImage(ctx context.Context, req *connect.Request[ib.GetImageRequest]) (*connect.Response[ib.GetImageResponse], error) {
	name := req.Msg.GetId().GetName()
	switch {
	case name == "":
		return nil, errs.Invalidf("id.name is required: the image's name:tag")
	case len(name) > maxName || strings.ContainsAny(name, " \t\r\n\x00"):
		return nil, errs.Invalidf("id.name %.80q is not an image name", name)
	}
	if s.store == nil {
		return nil, errs.NotFoundf("image %s: this manager builds no images", name)
	}
	fqin, run, err := s.store.Find(ctx, name)
	if err != nil {
		return nil, err
	}
	img := &ib.Image{Id: &ib.ImageIdentifier{Name: name}, Fqin: fqin}
	if run.Name != "" {
		img.BuildRun = &common.RunIdentifier{Org: run.Org, Project: run.Project, Domain: run.Domain, Name: run.Name}
	}
	return connect.NewResponse(&ib.GetImageResponse{Image: img}), nil
}
