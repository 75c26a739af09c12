package compose

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/authz"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/server"
)

// Every procedure the composed manager routes is anonymous or has an entry
// in authz.Procedures (a new procedure without one is refused to every
// caller with auth on, so this fails first), and the table names no
// procedure that is not routed.
func TestEveryRoutedProcedureHasAPermission(t *testing.T) {
	home := t.TempDir()
	cfg, err := config.Load(config.Sources{Overrides: map[string]any{
		"home": home, "server.port": 0,
		"database.dsn": "sqlite://" + filepath.ToSlash(filepath.Join(home, "m.db")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Prepare(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv := server.New(cfg.Server, nil)
	gdb, err := OpenDatabase(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.AddCloser("database", func(context.Context) error { return db.Close(gdb) })
	t.Cleanup(func() { _ = srv.Close() })
	if err := db.Migrate(ctx, gdb); err != nil {
		t.Fatal(err)
	}
	if err := Setup(ctx, &Deps{Config: cfg, DB: gdb, Log: srv.Logger(), Server: srv}); err != nil {
		t.Fatal(err)
	}
	routed := map[string]bool{}
	for _, name := range srv.Services() {
		desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		methods := desc.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			proc := "/" + name + "/" + string(methods.Get(i).Name())
			routed[proc] = true
			if _, ok := authz.Procedures[proc]; !ok && !authn.Anonymous(proc) {
				t.Errorf("%s is routed without an entry in authz.Procedures", proc)
			}
		}
	}
	for proc := range authz.Procedures {
		if !routed[proc] {
			t.Errorf("authz.Procedures names %s, which is not routed", proc)
		}
	}
}
