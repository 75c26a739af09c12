package secret_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"gorm.io/gorm"

	pb "fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/gen/go/flyteidl2/secret/secretconnect"
	"fmgr.dev/internal/config"
	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/pgtest"
	"fmgr.dev/internal/rpctest"
	"fmgr.dev/internal/server"
	"fmgr.dev/secret"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// harness serves SecretService through the manager's real server
// (interceptors, error mapping) over a real database, with a keyring
// generated into a fresh data directory.
type harness struct {
	g      *gorm.DB
	home   string
	svc    *secret.Service
	client secretconnect.SecretServiceClient
}

func newHarness(t *testing.T, g *gorm.DB) *harness {
	t.Helper()
	home := t.TempDir()
	svc, err := secret.Open(g, config.Secrets{}, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg := config.Default().Server
	srvCfg.Port = 0
	// Secrets are scoped by org: the tests name orgs of their own.
	srvCfg.Orgs.Separate = true
	srv := server.New(srvCfg, nil)
	if err := secret.Setup(srv, svc); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &harness{g: g, home: home, svc: svc, client: secretconnect.NewSecretServiceClient(hs.Client(), hs.URL)}
}

func eachDB(t *testing.T, fn func(t *testing.T, h *harness)) {
	dbtest.Each(t, func(t *testing.T, g *gorm.DB) { fn(t, newHarness(t, g)) })
}

func sid(name, domain, project string) *pb.SecretIdentifier {
	return &pb.SecretIdentifier{Name: name, Domain: domain, Project: project}
}

func str(v string) *pb.SecretSpec {
	return &pb.SecretSpec{Value: &pb.SecretSpec_StringValue{StringValue: v}}
}

func (h *harness) create(t *testing.T, id *pb.SecretIdentifier, value string) {
	t.Helper()
	if _, err := h.client.CreateSecret(context.Background(), connect.NewRequest(&pb.CreateSecretRequest{Id: id, SecretSpec: str(value)})); err != nil {
		t.Fatalf("create %v: %v", id, err)
	}
}

// resolve is what an attempt of project/domain gets for name.
func (h *harness) resolve(t *testing.T, domain, project, name string) (string, bool) {
	t.Helper()
	keys, err := secret.OpenKeyring(config.Secrets{}, h.home)
	if err != nil {
		t.Fatal(err)
	}
	v, ok, err := secret.NewStore(h.g, keys).Resolve(context.Background(), secret.Scope{Domain: domain, Project: project}, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// Create, Get, Update, Delete with the codes the SDK's commands expect; no
// answer carries the value.
func TestSecretLifecycle(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const value = "v4lue-that-must-not-leak"
		id := sid("api-key", "development", "flytesnacks")
		h.create(t, id, value)

		_, err := h.client.CreateSecret(ctx, connect.NewRequest(&pb.CreateSecretRequest{Id: id, SecretSpec: str("other")}))
		rpctest.WantCode(t, err, connect.CodeAlreadyExists, `"api-key"`)

		got, err := h.client.GetSecret(ctx, connect.NewRequest(&pb.GetSecretRequest{Id: id}))
		if err != nil {
			t.Fatal(err)
		}
		s := got.Msg.GetSecret()
		if s.GetId().GetName() != "api-key" || s.GetId().GetProject() != "flytesnacks" || s.GetId().GetDomain() != "development" ||
			s.GetSecretMetadata().GetCreatedTime() == nil || s.GetSecretMetadata().GetSecretStatus().GetOverallStatus() != pb.OverallStatus_FULLY_PRESENT {
			t.Fatalf("GetSecret = %v", s)
		}
		wire, _ := proto.Marshal(got.Msg)
		if bytes.Contains(wire, []byte(value)) {
			t.Fatal("GetSecret returned the value")
		}
		if v, _ := h.resolve(t, "development", "flytesnacks", "api-key"); v != value {
			t.Fatalf("stored value %q", v)
		}

		if _, err := h.client.UpdateSecret(ctx, connect.NewRequest(&pb.UpdateSecretRequest{Id: id, SecretSpec: &pb.SecretSpec{
			Value: &pb.SecretSpec_BinaryValue{BinaryValue: []byte("new\x00bytes")}}})); err != nil {
			t.Fatal(err)
		}
		if v, _ := h.resolve(t, "development", "flytesnacks", "api-key"); v != "new\x00bytes" {
			t.Fatalf("updated value %q", v)
		}
		_, err = h.client.UpdateSecret(ctx, connect.NewRequest(&pb.UpdateSecretRequest{Id: sid("nope", "development", "flytesnacks"), SecretSpec: str("x")}))
		rpctest.WantCode(t, err, connect.CodeNotFound, `"nope"`)

		if _, err := h.client.DeleteSecret(ctx, connect.NewRequest(&pb.DeleteSecretRequest{Id: id})); err != nil {
			t.Fatal(err)
		}
		_, err = h.client.GetSecret(ctx, connect.NewRequest(&pb.GetSecretRequest{Id: id}))
		rpctest.WantCode(t, err, connect.CodeNotFound, `"api-key"`)
		_, err = h.client.DeleteSecret(ctx, connect.NewRequest(&pb.DeleteSecretRequest{Id: id}))
		rpctest.WantCode(t, err, connect.CodeNotFound)
	})
}

// Bad input is refused with InvalidArgument and a message naming what is
// wrong (never the value), and stores nothing.
func TestSecretBadInput(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		for name, tc := range map[string]struct {
			req  *pb.CreateSecretRequest
			want string
		}{
			"project without domain": {&pb.CreateSecretRequest{Id: sid("a", "", "flytesnacks"), SecretSpec: str("x")}, "needs a domain"},
			"no id":                  {&pb.CreateSecretRequest{SecretSpec: str("x")}, "id is required"},
			"no name":                {&pb.CreateSecretRequest{Id: sid("", "development", ""), SecretSpec: str("x")}, "id.name is required"},
			"bad name":               {&pb.CreateSecretRequest{Id: sid("a/b", "", ""), SecretSpec: str("x")}, `secret name "a/b" may only contain`},
			"bad domain":             {&pb.CreateSecretRequest{Id: sid("a", "dev elopment", ""), SecretSpec: str("x")}, `domain "dev elopment"`},
			"no value":               {&pb.CreateSecretRequest{Id: sid("a", "", ""), SecretSpec: &pb.SecretSpec{}}, "needs a value"},
			"unknown type":           {&pb.CreateSecretRequest{Id: sid("a", "", ""), SecretSpec: &pb.SecretSpec{Type: 7, Value: &pb.SecretSpec_StringValue{StringValue: "x"}}}, "type 7"},
			"too large": {&pb.CreateSecretRequest{Id: sid("a", "", ""), SecretSpec: &pb.SecretSpec{
				Value: &pb.SecretSpec_BinaryValue{BinaryValue: make([]byte, secret.MaxValueBytes+1)}}}, "at most"},
		} {
			_, err := h.client.CreateSecret(ctx, connect.NewRequest(tc.req))
			t.Run(name, func(t *testing.T) { rpctest.WantCode(t, err, connect.CodeInvalidArgument, tc.want) })
		}
		_, err := h.client.ListSecrets(ctx, connect.NewRequest(&pb.ListSecretsRequest{Project: "flytesnacks"}))
		rpctest.WantCode(t, err, connect.CodeInvalidArgument, "needs a domain")
		_, err = h.client.ListSecrets(ctx, connect.NewRequest(&pb.ListSecretsRequest{Token: "garbage"}))
		rpctest.WantCode(t, err, connect.CodeInvalidArgument, "page token")

		list, err := h.client.ListSecrets(ctx, connect.NewRequest(&pb.ListSecretsRequest{}))
		if err != nil || len(list.Msg.GetSecrets()) != 0 {
			t.Fatalf("after refused creates: %v, %v", list.Msg.GetSecrets(), err)
		}
	})
}

// Lists page by keyset tokens and narrow by scope as the reference's label
// selectors do: the org's every secret, a domain's, or one project's.
func TestListSecrets(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		h.create(t, sid("org-wide", "", ""), "1")
		h.create(t, sid("dom", "development", ""), "2")
		for i := range 5 {
			h.create(t, sid(fmt.Sprintf("p%d", i), "development", "flytesnacks"), "3")
		}
		h.create(t, sid("other", "production", "flytesnacks"), "4")

		list := func(req *pb.ListSecretsRequest) []string {
			var names []string
			for {
				resp, err := h.client.ListSecrets(ctx, connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Msg.GetSecrets()) > int(max(req.Limit, 100)) {
					t.Fatalf("page of %d over limit %d", len(resp.Msg.GetSecrets()), req.Limit)
				}
				for _, s := range resp.Msg.GetSecrets() {
					names = append(names, s.GetId().GetName())
				}
				if req.Token = resp.Msg.GetToken(); req.Token == "" {
					return names
				}
			}
		}
		for _, tc := range []struct {
			req  *pb.ListSecretsRequest
			want string
		}{
			{&pb.ListSecretsRequest{Domain: "development", Project: "flytesnacks", Limit: 2}, "[p0 p1 p2 p3 p4]"},
			{&pb.ListSecretsRequest{Domain: "development", Limit: 3}, "[dom p0 p1 p2 p3 p4]"},
			{&pb.ListSecretsRequest{Organization: "local"}, "[dom org-wide other p0 p1 p2 p3 p4]"},
			{&pb.ListSecretsRequest{Organization: "another-org"}, "[]"},
		} {
			if got := fmt.Sprint(list(tc.req)); got != tc.want {
				t.Errorf("list %v = %s, want %s", tc.req, got, tc.want)
			}
		}
	})
}

// An attempt gets the most specific secret of its name: its project's
// domain, else its domain, else the org's.
func TestResolveCascades(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		h.create(t, sid("token", "", ""), "org")
		h.create(t, sid("token", "development", ""), "domain")
		h.create(t, sid("token", "development", "flytesnacks"), "project")
		for _, tc := range []struct{ domain, project, want string }{
			{"development", "flytesnacks", "project"},
			{"development", "other", "domain"},
			{"production", "flytesnacks", "org"},
		} {
			if v, ok := h.resolve(t, tc.domain, tc.project, "token"); !ok || v != tc.want {
				t.Errorf("%s/%s: %q %v, want %q", tc.project, tc.domain, v, ok, tc.want)
			}
		}
		if _, ok := h.resolve(t, "development", "flytesnacks", "missing"); ok {
			t.Error("a missing secret resolved")
		}
	})
}

// At rest a value is sealed: the column holds no plaintext, and a sealed
// value moved to another secret's row does not open there.
func TestValuesSealedAtRest(t *testing.T) {
	eachDB(t, func(t *testing.T, h *harness) {
		const value = "plaintext-canary-0451"
		h.create(t, sid("a", "development", ""), value)
		h.create(t, sid("b", "development", ""), "other")
		type col struct {
			Name  string
			KeyID string
			Value []byte
		}
		var rows []col
		if err := h.g.Raw("SELECT name, key_id, value FROM secrets ORDER BY name").Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].KeyID == "" || rows[0].KeyID != rows[1].KeyID {
			t.Fatalf("rows %+v, want two under one key id", rows)
		}
		if bytes.Contains(rows[0].Value, []byte(value)) {
			t.Fatal("the value is stored in plain text")
		}
		if err := h.g.Exec("UPDATE secrets SET value = ? WHERE name = 'b'", rows[0].Value).Error; err != nil {
			t.Fatal(err)
		}
		keys, err := secret.OpenKeyring(config.Secrets{}, h.home)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = secret.NewStore(h.g, keys).Resolve(context.Background(), secret.Scope{Domain: "development"}, "b")
		if err == nil {
			t.Fatal("a value moved to another secret opened")
		}
		if bytes.Contains([]byte(err.Error()), []byte(value)) {
			t.Fatalf("the error shows the value: %v", err)
		}
		if _, err := filepath.Abs(keys.Path()); err != nil || keys.Path() != filepath.Join(h.home, config.SecretsKeyringFile) {
			t.Errorf("keyring at %q, want the data dir's", keys.Path())
		}
	})
}
