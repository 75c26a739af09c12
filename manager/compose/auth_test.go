package compose

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"gorm.io/gorm"

	"fmgr.dev/apikey"
	"fmgr.dev/internal/authn"
	"fmgr.dev/internal/authz"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
	"fmgr.dev/internal/server"
)

// composed is the whole manager's server set up (not serving) on a fresh
// SQLite home, with overrides on top of the defaults.
func composed(t *testing.T, overrides map[string]any) (*server.Server, *gorm.DB, *config.Config) {
	t.Helper()
	home := t.TempDir()
	o := map[string]any{"home": home, "server.port": 0,
		"database.dsn": "sqlite://" + filepath.ToSlash(filepath.Join(home, "m.db"))}
	for k, v := range overrides {
		o[k] = v
	}
	cfg, err := config.Load(config.Sources{Overrides: o})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Prepare(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv := server.New(cfg.Server, slog.New(slog.DiscardHandler))
	gdb, err := OpenDatabase(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.AddCloser("database", func(context.Context) error { return db.Close(gdb) })
	t.Cleanup(func() { _ = srv.Close() })
	if err := db.Migrate(ctx, gdb); err != nil {
		t.Fatal(err)
	}
	if err := setupAuth(cfg, gdb, srv, srv.Logger()); err != nil {
		t.Fatal(err)
	}
	if err := Setup(ctx, &Deps{Config: cfg, DB: gdb, Log: srv.Logger(), Server: srv}); err != nil {
		t.Fatal(err)
	}
	return srv, gdb, cfg
}

// routedMethods are the methods of every service srv routes.
func routedMethods(t *testing.T, srv *server.Server) []protoreflect.MethodDescriptor {
	t.Helper()
	var out []protoreflect.MethodDescriptor
	for _, name := range srv.Services() {
		desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		methods := desc.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			out = append(out, methods.Get(i))
		}
	}
	return out
}

func procedure(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}

// Every procedure the composed manager routes is anonymous or has an entry
// in authz.Procedures (a new procedure without one is refused to every
// caller with auth on, so this fails first), and the table names no
// procedure that is not routed.
func TestEveryRoutedProcedureHasAPermission(t *testing.T) {
	srv, _, _ := composed(t, nil)
	routed := map[string]bool{}
	for _, md := range routedMethods(t, srv) {
		proc := procedure(md)
		routed[proc] = true
		if _, ok := authz.Procedures[proc]; !ok && !authn.Anonymous(proc) {
			t.Errorf("%s is routed without an entry in authz.Procedures", proc)
		}
	}
	for proc := range authz.Procedures {
		if !routed[proc] {
			t.Errorf("authz.Procedures names %s, which is not routed", proc)
		}
	}
}

// nameProject sets every project and domain a request can name, in nested
// messages too, to project/domain.
func nameProject(m protoreflect.Message, project, domain string, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.IsList() || f.IsMap() {
			continue
		}
		switch {
		case f.Kind() == protoreflect.StringKind && (f.Name() == "project" ||
			(f.Name() == "name" && m.Descriptor().FullName() == "flyteidl2.common.ProjectIdentifier")):
			m.Set(f, protoreflect.ValueOfString(project))
		case f.Kind() == protoreflect.StringKind && f.Name() == "domain":
			m.Set(f, protoreflect.ValueOfString(domain))
		case f.Kind() == protoreflect.MessageKind && depth > 0 && f.ContainingOneof() == nil:
			nameProject(m.Mutable(f).Message(), project, domain, depth-1)
		}
	}
	// One member of each oneof that can carry an identifier.
	oneofs := m.Descriptor().Oneofs()
	for i := range oneofs.Len() {
		of := oneofs.Get(i)
		for j := range of.Fields().Len() {
			if f := of.Fields().Get(j); f.Kind() == protoreflect.MessageKind && depth > 0 {
				nameProject(m.Mutable(f).Message(), project, domain, depth-1)
				break
			}
		}
	}
}

// scoped reports whether m names a project.
func scoped(m *dynamicpb.Message) bool {
	_, _, ok := authz.Scope(m)
	return ok
}

// With auth required, over every routed procedure: no credential is
// UNAUTHENTICATED; a key with every role on another project is
// PERMISSION_DENIED for a request naming this one, and nothing is
// written; a viewer cannot CreateRun. (The database-backed key store is
// tested on both databases in apikey.)
func TestAuthOverEveryRoutedProcedure(t *testing.T) {
	srv, gdb, cfg := composed(t, map[string]any{"auth.mode": "required"})
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	base := "http://" + srv.Addr().String()
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true) // bidi streams need HTTP/2
	client := &http.Client{Transport: &http.Transport{Protocols: &h2c}}

	keys := apikey.NewStore(gdb)
	other, otherSecret, err := keys.Create(ctx, "other", apikey.RoleAdmin, "elsewhere", apikey.Any)
	if err != nil {
		t.Fatal(err)
	}
	viewer, viewerSecret, err := keys.Create(ctx, "viewer", apikey.RoleViewer, "flytesnacks", apikey.Any)
	if err != nil {
		t.Fatal(err)
	}
	var actionsBefore int64
	gdb.Table("actions").Count(&actionsBefore)

	call := func(md protoreflect.MethodDescriptor, bearer string, name bool) error {
		req := dynamicpb.NewMessage(md.Input())
		if name {
			nameProject(req, "flytesnacks", "development", 3)
		}
		c := connect.NewClient[dynamicpb.Message, dynamicpb.Message](client, base+procedure(md),
			connect.WithSchema(md), connect.WithResponseInitializer(func(spec connect.Spec, msg any) error {
				*msg.(*dynamicpb.Message) = *dynamicpb.NewMessage(md.Output())
				return nil
			}))
		switch {
		case md.IsStreamingClient() && md.IsStreamingServer():
			s := c.CallBidiStream(ctx)
			if bearer != "" {
				s.RequestHeader().Set("Authorization", "Bearer "+bearer)
			}
			_ = s.Send(req)
			_ = s.CloseRequest()
			_, err := s.Receive()
			_ = s.CloseResponse()
			return err
		case md.IsStreamingClient():
			s := c.CallClientStream(ctx)
			if bearer != "" {
				s.RequestHeader().Set("Authorization", "Bearer "+bearer)
			}
			_ = s.Send(req)
			_, err := s.CloseAndReceive()
			return err
		case md.IsStreamingServer():
			r := connect.NewRequest(req)
			if bearer != "" {
				r.Header().Set("Authorization", "Bearer "+bearer)
			}
			s, err := c.CallServerStream(ctx, r)
			if err != nil {
				return err
			}
			defer s.Close()
			for s.Receive() {
			}
			return s.Err()
		default:
			r := connect.NewRequest(req)
			if bearer != "" {
				r.Header().Set("Authorization", "Bearer "+bearer)
			}
			_, err := c.CallUnary(ctx, r)
			return err
		}
	}
	for _, md := range routedMethods(t, srv) {
		proc := procedure(md)
		if authn.Anonymous(proc) {
			continue
		}
		if err := call(md, "", true); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("%s without a credential: %v, want UNAUTHENTICATED", proc, err)
		}
		if authz.Unscoped[proc] {
			continue // answers project names (or nothing) to any role
		}
		if req := dynamicpb.NewMessage(md.Input()); authz.Filtered[proc] {
			if nameProject(req, "flytesnacks", "development", 3); !scoped(req) {
				continue // a list naming no project: its answer is filtered (internal/server)
			}
		}
		if err := call(md, other.KeyID+":"+otherSecret, true); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s with an admin key of another project: %v, want PERMISSION_DENIED", proc, err)
		}
	}
	// A task's credential (of a run in the project the requests name) is
	// refused every procedure but its own run's; an admin key of the
	// project is refused the manager's internal ones.
	admin, adminSecret, err := keys.Create(ctx, "admin", apikey.RoleAdmin, "flytesnacks", apikey.Any)
	if err != nil {
		t.Fatal(err)
	}
	task := taskCredentialKey(cfg).Mint(authn.RunScope{Project: "flytesnacks", Domain: "development", Run: "r1"}, "a0", time.Now().Add(time.Hour))
	for _, md := range routedMethods(t, srv) {
		proc := procedure(md)
		if _, ok := authz.TaskProcedures[proc]; !ok && !authn.Anonymous(proc) {
			if err := call(md, task, true); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("%s with a task's credential: %v, want PERMISSION_DENIED", proc, err)
			}
		}
		if authz.Internal[proc] {
			if err := call(md, admin.KeyID+":"+adminSecret, true); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("%s with an admin key: %v, want PERMISSION_DENIED", proc, err)
			}
		}
	}
	for _, md := range routedMethods(t, srv) {
		if procedure(md) == "/flyteidl2.workflow.RunService/CreateRun" {
			if err := call(md, viewer.KeyID+":"+viewerSecret, true); connect.CodeOf(err) != connect.CodePermissionDenied {
				t.Errorf("CreateRun by a viewer: %v, want PERMISSION_DENIED", err)
			}
		}
	}
	var actionsAfter int64
	gdb.Table("actions").Count(&actionsAfter)
	if actionsAfter != actionsBefore {
		t.Errorf("denied calls changed the actions table: %d rows, was %d", actionsAfter, actionsBefore)
	}
}
