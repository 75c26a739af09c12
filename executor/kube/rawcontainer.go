package kube

import (
	"fmt"

	"fmgr.dev/executor/attempt"
)

// Raw container tasks (package copilot) in a Pod: the attempt core fills
// their `{{.inputs.<name>}}` templates, but nothing stages their data yet
// (the reference runs an init container that downloads the inputs into the
// input directory and a sidecar that uploads the outputs when the command
// ends). A raw container with no inputs and no outputs needs neither, and
// runs in its image as it is; one with data fails at once, saying so,
// instead of running without its inputs and ending without its outputs.
func rawContainerUnsupported(l *attempt.Launch) error {
	if l.Raw == nil {
		return nil
	}
	iface := l.Spec.GetTaskTemplate().GetInterface()
	if len(iface.GetInputs().GetVariables()) == 0 && len(iface.GetOutputs().GetVariables()) == 0 {
		return nil
	}
	return fmt.Errorf("raw container tasks with inputs or outputs (ContainerTask's %s and %s) are not supported by the kubernetes executor yet: "+
		"it does not stage their data; run them with the local executor", l.Raw.InputDir, l.Raw.OutputDir)
}
