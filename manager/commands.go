package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/manager/compose"
)

func newMigrateCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			gdb, err := openDatabase(ctx, cfg, true)
			if err != nil {
				return err
			}
			defer db.Close(gdb)
			v, err := db.Version(ctx, gdb)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "database %s is at schema version %d\n", cfg.Redacted().Database.DSN, v)
			return nil
		},
	}
}

// openDatabase opens cfg's database for a command, first applying the
// pending migrations when migrate is set; the caller closes it (db.Close).
// withDatabase loads the configuration, opens its database (migrated
// first when migrate) and runs fn with them, closing the database after.
func (g *globalFlags) withDatabase(cmd *cobra.Command, migrate bool, fn func(ctx context.Context, cfg *config.Config, gdb *gorm.DB) error) error {
	cfg, err := g.loadConfig(cmd)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	gdb, err := openDatabase(ctx, cfg, migrate)
	if err != nil {
		return err
	}
	defer db.Close(gdb)
	return fn(ctx, cfg, gdb)
}

func openDatabase(ctx context.Context, cfg *config.Config, migrate bool) (*gorm.DB, error) {
	gdb, err := compose.OpenDatabase(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := db.Migrate(ctx, gdb); err != nil {
			_ = db.Close(gdb)
			return nil, fmt.Errorf("migrating: %w", err)
		}
	}
	return gdb, nil
}

func newConfigCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration as YAML (secrets redacted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig(cmd)
			if err != nil {
				return err
			}
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "flyte-manager %s (commit %s, %s %s/%s)\n",
				version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}
