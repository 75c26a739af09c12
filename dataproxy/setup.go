package dataproxy

import "fmgr.dev/internal/server"

// Setup mounts DataProxyService and ClusterService on srv, and the plain
// routes beside them (srv.Handle: the signed-URL blobs and the log
// endpoint take no Connect options and no gzip pre-decompression).
func Setup(srv *server.Server, d Deps) error {
	if d.AuthorizeRead == nil {
		d.AuthorizeRead = srv.AuthorizeRead
	}
	for _, r := range New(d).Handlers(srv.HandlerOptions()...) {
		var err error
		if r.Plain {
			err = srv.Handle(server.Route{Pattern: r.Path, Handler: r.Handler})
		} else {
			err = srv.Mount(server.Service{Path: r.Path, Handler: r.Handler})
		}
		if err != nil {
			return err
		}
	}
	return nil
}
