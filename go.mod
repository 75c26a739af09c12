module fmgr.dev

go 1.26.0

require google.golang.org/protobuf v1.36.12 // indirect

require connectrpc.com/connect v1.21.1

replace fmgr.dev/gen/go => ./gen/go
