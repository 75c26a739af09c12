package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"fmgr.dev/internal/db"
	"fmgr.dev/secret"
)

func newSecretsCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage the key that encrypts the Secret service's values",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "rotate-key",
		Short: "Seal every secret under a new key and retire the old ones, while managers keep running",
		Long: `rotate-key adds a new key to the secrets keyring file (secrets.keyFile, by default
<home>/secrets.keyring), seals every stored secret again under it, and then removes the
old keys from the file. Running managers re-read the keyring file whenever it changes, so
they read every secret throughout and need no restart. Every manager must see the same
keyring file. A fixed secrets.key cannot be rotated: move it into a keyring file first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			defer db.Close(gdb)
			rot, err := secret.Rotate(ctx, gdb, cfg.Secrets, cfg.Home)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sealed %d secret(s) again under key %s; retired key(s): %s\n",
				rot.Resealed, rot.NewKeyID, strings.Join(rot.Retired, ", "))
			return nil
		},
	})
	return cmd
}
