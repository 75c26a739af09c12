// Package cache serves the cache services (flyteidl2.cacheservice and its
// v2): task output caching with reservations. Until the cache work item
// lands every procedure is routed and answers Unimplemented.
package cache

import (
	"fmgr.dev/gen/go/flyteidl2/cacheservice/cacheserviceconnect"
	cachev2connect "fmgr.dev/gen/go/flyteidl2/cacheservice/v2/v2connect"
	"fmgr.dev/internal/server"
)

// Setup mounts both cache service versions on srv.
func Setup(srv *server.Server) error {
	opts := srv.HandlerOptions()
	return srv.Mount(
		server.NewService(cacheserviceconnect.NewCacheServiceHandler(cacheserviceconnect.UnimplementedCacheServiceHandler{}, opts...)),
		server.NewService(cachev2connect.NewCacheServiceHandler(cachev2connect.UnimplementedCacheServiceHandler{}, opts...)),
	)
}
