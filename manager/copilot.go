package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"fmgr.dev/executor/copilot"
	"fmgr.dev/executor/kube"
	"fmgr.dev/internal/blob"
	"fmgr.dev/internal/config"
)

// The `flyte-manager copilot` commands run inside a raw container task's
// Pod on the kubernetes executor (see executor/kube/rawcontainer.go): they
// read no configuration file, only their flags and the Pod's environment.

func newCopilotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "copilot",
		Short:  "Stage a raw container task's data inside its Pod (run by the kubernetes executor)",
		Hidden: true,
	}
	cmd.AddCommand(newCopilotDownloadCmd(), newCopilotUploadCmd())
	return cmd
}

// copilotFlags are the flags both commands take.
type copilotFlags struct{ storage, job string }

func (f *copilotFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.storage, "storage", "", "the manager's storage URL")
	cmd.Flags().StringVar(&f.job, "job", "", "the task's data contract, as the manager encodes it")
	_ = cmd.MarkFlagRequired("storage")
	_ = cmd.MarkFlagRequired("job")
}

func (f *copilotFlags) open(ctx context.Context, inputsURI string) (*blob.Store, *copilot.Job, error) {
	// An S3 store's endpoint and credentials come from the Pod's
	// environment, as the task's runtime reads them.
	blobs, err := blob.OpenWith(ctx, f.storage, blob.Options{S3: blob.S3FromEnv(os.Getenv)})
	if err != nil {
		return nil, nil, err
	}
	inputs, err := copilot.ReadInputs(ctx, blobs, inputsURI)
	if err != nil {
		blobs.Close()
		return nil, nil, fmt.Errorf("reading the inputs: %w", err)
	}
	job, err := copilot.Decode(f.job, inputs)
	if err != nil {
		blobs.Close()
		return nil, nil, err
	}
	return blobs, job, nil
}

func newCopilotDownloadCmd() *cobra.Command {
	var f copilotFlags
	var inputs string
	var hostFiles bool
	cmd := &cobra.Command{
		Use:   "download",
		Short: "Materialise the attempt's inputs in the task's input directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			blobs, job, err := f.open(ctx, inputs)
			if err != nil {
				return err
			}
			defer blobs.Close()
			job.HostFiles = hostFiles
			if err := job.Download(ctx, blobs, job.InputDir); err != nil {
				return fmt.Errorf("materialising the inputs in %s: %w", job.InputDir, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "copilot: inputs materialised in %s\n", job.InputDir)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&inputs, "inputs", "", "the attempt's inputs file in storage")
	cmd.Flags().BoolVar(&hostFiles, "host-files", false, "copy file inputs that name a local path outside the storage (file:// storage shared with the Pods)")
	return cmd
}

func newCopilotUploadCmd() *cobra.Command {
	var f copilotFlags
	var outPrefix string
	every := 2 * time.Second
	cmd := &cobra.Command{
		Use:   "upload",
		Short: "Wait for the task's container to end, then record its outputs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			blobs, job, err := f.open(ctx, "")
			if err != nil {
				return err
			}
			defer blobs.Close()
			// In-cluster credentials, or $KUBECONFIG outside a cluster.
			rc, err := kube.RESTConfig(config.KubernetesExecutor{QPS: 5, Burst: 10})
			if err != nil {
				return err
			}
			ns, name := kube.PodFromEnv(os.Getenv)
			code, err := kube.WaitForTask(ctx, rc, ns, name, every)
			if err != nil {
				return err
			}
			if code != 0 {
				// The exit is the result, as on the local executor.
				fmt.Fprintf(cmd.OutOrStdout(), "copilot: the task exited %d; no outputs to record\n", code)
				return nil
			}
			if err := job.Collect(ctx, blobs, job.OutputDir, outPrefix); err != nil {
				return fmt.Errorf("recording the outputs: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "copilot: outputs of %s recorded under %s\n", job.OutputDir, outPrefix)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&outPrefix, "output-prefix", "", "the attempt's output prefix in storage")
	cmd.Flags().DurationVar(&every, "poll", every, "how often to look at the Pod's status")
	_ = cmd.MarkFlagRequired("output-prefix")
	_ = cmd.Flags().MarkHidden("poll")
	return cmd
}
