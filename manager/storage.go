package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"fmgr.dev/manager/compose"
)

// newStorageCmd is `flyte-manager storage`.
func newStorageCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "The manager's blob storage",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStorageEnvCmd(g))
	return cmd
}

// newStorageEnvCmd is `flyte-manager storage env`: the variables an SDK
// client needs to read outputs from the store itself.
func newStorageEnvCmd(g *globalFlags) *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the environment an SDK client needs to read outputs itself (eval \"$(flyte-manager storage env)\")",
		Long: "Print, as shell export lines, the variables the flyte SDK reads to reach the manager's store\n" +
			"(FLYTE_AWS_ENDPOINT, FLYTE_AWS_ACCESS_KEY_ID, FLYTE_AWS_SECRET_ACCESS_KEY, ...): the S3 endpoint and its\n" +
			"key for file:// storage, the store's endpoint and static keys for s3:// storage. A client needs them to\n" +
			"download File and Dir outputs (everything else goes through the API). The secret key is printed: keep\n" +
			"the output to yourself. Give it the same --config and --home as the manager.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			if err := cfg.Prepare(); err != nil {
				return err
			}
			env, err := compose.ClientStorageEnv(cfg, endpoint)
			if err != nil {
				return err
			}
			for _, kv := range env {
				fmt.Fprintf(cmd.OutOrStdout(), "export %s\n", shellQuote(kv))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the S3 endpoint's HOST:PORT as the client reaches it (default: storage.s3Endpoint.listen)")
	return cmd
}

// shellQuote quotes the value of k=v for a POSIX shell.
func shellQuote(kv string) string {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			v := kv[i+1:]
			out := "'"
			for _, c := range v {
				if c == '\'' {
					out += `'\''`
				} else {
					out += string(c)
				}
			}
			return kv[:i+1] + out + "'"
		}
	}
	return kv
}
