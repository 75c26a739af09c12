package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"fmgr.dev/kubeapi"
	"fmgr.dev/manager/compose"
)

// newKubeconfigCmd is `flyte-manager kubeconfig`: a kubeconfig for the
// Kubernetes-style API, with a new bearer token.
func newKubeconfigCmd(g *globalFlags) *cobra.Command {
	var server string
	var rotate bool
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for kubectl against this manager's Kubernetes-style API (a new token each time)",
		Long: "Print a kubeconfig (cluster, user and context flyte-manager, in the default namespace) for the manager's\n" +
			"Kubernetes-style API on kubeAPI.listen, e.g. flyte-manager kubeconfig > ~/.kube/flyte.yaml.\n" +
			"Each run mints a new bearer token and stores only its hash in <home>/kubeapi; --rotate revokes every\n" +
			"earlier token first. A running manager accepts the new token at once. Give it the same --config and\n" +
			"--home as the manager.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			if err := cfg.Prepare(); err != nil {
				return err
			}
			if server == "" {
				host, port, err := net.SplitHostPort(cfg.KubeAPI.Listen)
				if err != nil || port == "0" {
					return fmt.Errorf("kubeAPI.listen is %q: name the server with --server https://HOST:PORT", cfg.KubeAPI.Listen)
				}
				if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
					host = "127.0.0.1"
				}
				server = "https://" + net.JoinHostPort(host, port)
			}
			dir := compose.KubeAPIDir(cfg)
			host, _, _ := net.SplitHostPort(cfg.KubeAPI.Listen)
			_, caPEM, err := kubeapi.EnsureCertificate(dir, host)
			if err != nil {
				return err
			}
			token, err := kubeapi.MintToken(dir, rotate)
			if err != nil {
				return err
			}
			out, err := kubeapi.Kubeconfig(server, caPEM, token, compose.KubeDefaultNamespace(cfg))
			if err != nil {
				return err
			}
			if rotate {
				fmt.Fprintln(cmd.ErrOrStderr(), "every earlier kube API token is revoked")
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "the API's URL as kubectl reaches it (default: https://<kubeAPI.listen>)")
	cmd.Flags().BoolVar(&rotate, "rotate", false, "revoke every token handed out before this one")
	return cmd
}
