module fmgr.dev/gen/go

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/protobuf v1.36.12
)
