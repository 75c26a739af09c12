package dataproxy

import (
	"context"

	"connectrpc.com/connect"

	"fmgr.dev/gen/go/flyteidl2/cluster"
	"fmgr.dev/internal/requrl"
)

// SelectCluster tells the caller where to send the data-plane call it is
// about to make. There is one cluster: this manager, at the URL the caller
// used (requrl.BaseURL: scheme and Host, or the configured external URL).
// The Host is one the server's Host guard accepted, so the answer never
// sends a client to a name an attacker chose; a request naming any other
// Host is refused before it gets here.
// The SDK reuses its own client when that equals the endpoint it called,
// and the UI needs a non-empty http(s) URL. Every resource kind and every
// operation, including ones added after this was written, gets the same
// answer: a malformed message never decodes this far.
func (s *Service) SelectCluster(ctx context.Context, _ *connect.Request[cluster.SelectClusterRequest]) (*connect.Response[cluster.SelectClusterResponse], error) {
	return connect.NewResponse(&cluster.SelectClusterResponse{ClusterEndpoint: requrl.BaseURL(ctx)}), nil
}
