package conformance

// Link every generated package so its descriptors are registered.
import (
	_ "fmgr.dev/gen/go/flyteidl2/actions"
	_ "fmgr.dev/gen/go/flyteidl2/app"
	_ "fmgr.dev/gen/go/flyteidl2/auth"
	_ "fmgr.dev/gen/go/flyteidl2/cacheservice"
	_ "fmgr.dev/gen/go/flyteidl2/cacheservice/v2"
	_ "fmgr.dev/gen/go/flyteidl2/cluster"
	_ "fmgr.dev/gen/go/flyteidl2/common"
	_ "fmgr.dev/gen/go/flyteidl2/core"
	_ "fmgr.dev/gen/go/flyteidl2/dataproxy"
	_ "fmgr.dev/gen/go/flyteidl2/imagebuilder"
	_ "fmgr.dev/gen/go/flyteidl2/logs/dataplane"
	_ "fmgr.dev/gen/go/flyteidl2/notification"
	_ "fmgr.dev/gen/go/flyteidl2/project"
	_ "fmgr.dev/gen/go/flyteidl2/secret"
	_ "fmgr.dev/gen/go/flyteidl2/task"
	_ "fmgr.dev/gen/go/flyteidl2/trigger"
	_ "fmgr.dev/gen/go/flyteidl2/workflow"
)
