package retention

import (
	"slices"

	"google.golang.org/protobuf/proto"

	"fmgr.dev/gen/go/flyteidl2/task"
)

// bundleURIs returns the code bundles that stored task specs name: the
// template's code_bundle_uri, and the archive after the SDK's --tgz or
// --pkl in the container's arguments.
func bundleURIs(specs [][]byte) []string {
	var out []string
	for _, raw := range specs {
		var sp task.TaskSpec
		if proto.Unmarshal(raw, &sp) != nil {
			continue
		}
		tmpl := sp.GetTaskTemplate()
		if u := tmpl.GetMetadata().GetCodeBundleUri(); u != "" {
			out = append(out, u)
		}
		args := tmpl.GetContainer().GetArgs()
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--tgz" || args[i] == "--pkl" {
				out = append(out, args[i+1])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
