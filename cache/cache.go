// Package cache serves the cache services (flyteidl2.cacheservice and its
// v2): task output caching with reservations. Until the cache work item
// lands every procedure is routed and answers Unimplemented.
package cache

import (
	"net/http"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/cacheservice/cacheserviceconnect"
	cachev2connect "fmgr.dev/gen/go/flyteidl2/cacheservice/v2/v2connect"
)

// Handlers mounts both cache service versions.
func Handlers(opts ...connect.HandlerOption) map[string]http.Handler {
	v1Path, v1 := cacheserviceconnect.NewCacheServiceHandler(cacheserviceconnect.UnimplementedCacheServiceHandler{}, opts...)
	v2Path, v2 := cachev2connect.NewCacheServiceHandler(cachev2connect.UnimplementedCacheServiceHandler{}, opts...)
	return map[string]http.Handler{v1Path: v1, v2Path: v2}
}
