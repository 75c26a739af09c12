package secret

import (
	"context"
	"regexp"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"fmgr.dev/gen/go/flyteidl2/common"
	pb "fmgr.dev/gen/go/flyteidl2/secret"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/ident"
	"fmgr.dev/internal/store"
)

// MaxValueBytes bounds one secret's value: it must fit a Kubernetes Secret
// (1 MiB in all) and an environment variable of a task.
const MaxValueBytes = 512 << 10

// ClusterName is the one cluster a secret's status names: values live in
// the manager's database and reach every attempt from there.
const ClusterName = "flyte-manager"

var (
	namePattern  = regexp.MustCompile(`^[-a-zA-Z0-9_]+$`)
	scopePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
)

// Service implements SecretService. Values go in; only metadata comes out.
type Service struct {
	store *Store
}

// NewService serves the secrets of s.
func NewService(s *Store) *Service { return &Service{store: s} }

// scopeOf validates a scope as requests name it: a project needs its
// domain (the reference answers the same); org "local" is the empty org
// (see ident.LocalOrg).
func scopeOf(org, domain, project string) (Scope, error) {
	for _, p := range []struct{ field, v string }{{"organization", org}, {"domain", domain}, {"project", project}} {
		if p.v == "" {
			continue
		}
		if len(p.v) > 63 || !scopePattern.MatchString(p.v) {
			return Scope{}, errs.Invalidf("%s %q may only contain letters, digits, '-' and '_' (at most 63, starting with a letter or digit)", p.field, p.v)
		}
	}
	if project != "" && domain == "" {
		return Scope{}, errs.Invalidf("a secret scoped to project %q needs a domain too (or neither, for an org-wide secret)", project)
	}
	return Scope{Org: ident.Org(org), Domain: domain, Project: project}, nil
}

// idOf validates a SecretIdentifier.
func idOf(id *pb.SecretIdentifier) (ID, error) {
	if id == nil {
		return ID{}, errs.Invalidf("id is required")
	}
	sc, err := scopeOf(id.GetOrganization(), id.GetDomain(), id.GetProject())
	if err != nil {
		return ID{}, err
	}
	name := id.GetName()
	switch {
	case name == "":
		return ID{}, errs.Invalidf("id.name is required")
	case len(name) > 128:
		return ID{}, errs.Invalidf("secret name %q is longer than 128 characters", name)
	case !namePattern.MatchString(name):
		return ID{}, errs.Invalidf("secret name %q may only contain letters, digits, '-' and '_'", name)
	}
	return ID{Scope: sc, Name: name}, nil
}

// specOf validates a SecretSpec: its type and its value. Its errors never
// include the value.
func specOf(spec *pb.SecretSpec) (int32, []byte, error) {
	if spec == nil || spec.GetValue() == nil {
		return 0, nil, errs.Invalidf("secret_spec needs a value: string_value or binary_value")
	}
	typ := spec.GetType()
	if _, known := pb.SecretType_name[int32(typ)]; !known {
		return 0, nil, errs.Invalidf("secret_spec.type %d is not a known secret type", typ)
	}
	var value []byte
	switch v := spec.GetValue().(type) {
	case *pb.SecretSpec_StringValue:
		value = []byte(v.StringValue)
	case *pb.SecretSpec_BinaryValue:
		value = v.BinaryValue
	}
	if len(value) > MaxValueBytes {
		return 0, nil, errs.Invalidf("secret value is %d bytes; at most %d are allowed", len(value), MaxValueBytes)
	}
	return int32(typ), value, nil
}

func (s *Service) CreateSecret(ctx context.Context, req *connect.Request[pb.CreateSecretRequest]) (*connect.Response[pb.CreateSecretResponse], error) {
	if err := write(ctx, req.Msg.GetId(), req.Msg.GetSecretSpec(), s.store.Create); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.CreateSecretResponse{}), nil
}

func (s *Service) UpdateSecret(ctx context.Context, req *connect.Request[pb.UpdateSecretRequest]) (*connect.Response[pb.UpdateSecretResponse], error) {
	if err := write(ctx, req.Msg.GetId(), req.Msg.GetSecretSpec(), s.store.Update); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.UpdateSecretResponse{}), nil
}

// write validates a Create or Update request and hands it to store.
func write(ctx context.Context, pid *pb.SecretIdentifier, spec *pb.SecretSpec, store func(context.Context, ID, int32, []byte) error) error {
	id, err := idOf(pid)
	if err != nil {
		return err
	}
	typ, value, err := specOf(spec)
	if err != nil {
		return err
	}
	return store(ctx, id, typ, value)
}

func (s *Service) GetSecret(ctx context.Context, req *connect.Request[pb.GetSecretRequest]) (*connect.Response[pb.GetSecretResponse], error) {
	id, err := idOf(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	m, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.GetSecretResponse{Secret: secretProto(m, req.Msg.GetId().GetOrganization())}), nil
}

func (s *Service) DeleteSecret(ctx context.Context, req *connect.Request[pb.DeleteSecretRequest]) (*connect.Response[pb.DeleteSecretResponse], error) {
	id, err := idOf(req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	if err := s.store.Delete(ctx, id); err != nil {
		return nil, err
	}
	return connect.NewResponse(&pb.DeleteSecretResponse{}), nil
}

func (s *Service) ListSecrets(ctx context.Context, req *connect.Request[pb.ListSecretsRequest]) (*connect.Response[pb.ListSecretsResponse], error) {
	m := req.Msg
	sc, err := scopeOf(m.GetOrganization(), m.GetDomain(), m.GetProject())
	if err != nil {
		return nil, err
	}
	if m.GetLimit() < 0 {
		return nil, errs.Invalidf("limit must not be negative, got %d", m.GetLimit())
	}
	metas, next, err := s.store.List(ctx, sc, store.Page{Limit: int(m.GetLimit()), Token: m.GetToken()})
	if err != nil {
		return nil, err
	}
	out := &pb.ListSecretsResponse{Token: next, Secrets: make([]*pb.Secret, len(metas))}
	for i, meta := range metas {
		out.Secrets[i] = secretProto(meta, m.GetOrganization())
	}
	return connect.NewResponse(out), nil
}

// secretProto is a secret as the API shows it: identity and metadata, never
// the value. org is the org the caller named (the empty org and "local"
// are one org; the caller gets back the spelling it sent).
func secretProto(m Meta, org string) *pb.Secret {
	return &pb.Secret{
		Id: &pb.SecretIdentifier{Name: m.ID.Name, Organization: org, Domain: m.ID.Domain, Project: m.ID.Project},
		SecretMetadata: &pb.SecretMetadata{
			CreatedTime: timestamppb.New(m.CreatedAt),
			Type:        pb.SecretType(m.Type),
			SecretStatus: &pb.SecretStatus{
				OverallStatus: pb.OverallStatus_FULLY_PRESENT,
				ClusterStatus: []*pb.ClusterSecretStatus{{
					Cluster:        &common.ClusterIdentifier{Organization: org, Name: ClusterName},
					PresenceStatus: pb.SecretPresenceStatus_PRESENT,
				}},
			},
		},
	}
}
