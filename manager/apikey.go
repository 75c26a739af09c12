package main

import (
	"context"
	"fmt"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"fmgr.dev/apikey"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
)

func newAPIKeyCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apikey",
		Short: "Create, list and revoke API keys (auth.mode required; see docs/auth.md)",
		Args:  cobra.NoArgs,
	}
	withStore := func(cmd *cobra.Command, fn func(ctx context.Context, cfg *config.Config, st *apikey.Store) error) error {
		cfg, err := g.loadConfig(cmd)
		if err != nil {
			return err
		}
		if err := cfg.Prepare(); err != nil {
			return err
		}
		ctx := cmd.Context()
		gdb, err := openDatabase(ctx, cfg, true)
		if err != nil {
			return err
		}
		defer func(g *gorm.DB) { _ = db.Close(g) }(gdb)
		return fn(ctx, cfg, apikey.NewStore(gdb))
	}

	var name, role, project, domain, endpoint string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a key and print it in the SDK's FLYTE_API_KEY format (shown once)",
		Long: `create stores a new API key (its secret only as a hash) bound to a role on a project
and domain ("*" for any) and prints it as FLYTE_API_KEY expects:
base64("<endpoint>:<key id>:<secret>:None"). The SDK connects to https://<endpoint>:443,
so the endpoint is a bare host: --endpoint, else server.externalURL's host, else localhost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, cfg *config.Config, st *apikey.Store) error {
				host := endpoint
				if host == "" {
					host = "localhost"
					if u, err := url.Parse(cfg.Server.ExternalURL); err == nil && u.Hostname() != "" {
						host = u.Hostname()
					}
				}
				if _, err := apikey.Encode(host, "x", "y"); err != nil {
					return err
				}
				k, secret, err := st.Create(ctx, name, role, project, domain)
				if err != nil {
					return err
				}
				key, err := apikey.Encode(host, k.KeyID, secret)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), key)
				fmt.Fprintf(cmd.ErrOrStderr(), "created API key %s (%s on project %s, domain %s); it is not shown again\n", k.KeyID, k.Role, k.Project, k.Domain)
				return nil
			})
		},
	}
	f := create.Flags()
	f.StringVar(&name, "name", "", "a name people recognize (shown by list and whoami)")
	f.StringVar(&role, "role", apikey.RoleViewer, "viewer, contributor or admin")
	f.StringVar(&project, "project", apikey.Any, `project the role applies to ("*" for any)`)
	f.StringVar(&domain, "domain", apikey.Any, `domain the role applies to ("*" for any)`)
	f.StringVar(&endpoint, "endpoint", "", "host name clients reach the manager at over https on 443")

	list := &cobra.Command{
		Use:   "list",
		Short: "List keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, _ *config.Config, st *apikey.Store) error {
				keys, err := st.List(ctx)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "KEY ID\tNAME\tROLE\tPROJECT\tDOMAIN\tCREATED\tREVOKED")
				for _, k := range keys {
					revoked := "-"
					if k.RevokedAt != nil {
						revoked = k.RevokedAt.UTC().Format("2006-01-02T15:04:05Z")
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.KeyID, k.Name, k.Role, k.Project, k.Domain,
						k.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), revoked)
				}
				return w.Flush()
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke KEY_ID...",
		Short: "Revoke keys; they and the tokens minted from them stop working at once",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, _ *config.Config, st *apikey.Store) error {
				for _, id := range args {
					if err := st.Revoke(ctx, id); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", id)
				}
				return nil
			})
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}
