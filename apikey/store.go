// Package apikey is the manager's own credentials: API keys (created with
// `flyte-manager apikey create`, stored hashed), the short-lived tokens
// the token endpoint mints from them (the SDK's ClientSecret flow and
// FLYTE_API_KEY), and the verifier the server's auth interceptor asks.
package apikey

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// Roles, each including the one before.
const (
	RoleViewer      = "viewer"
	RoleContributor = "contributor"
	RoleAdmin       = "admin"
)

// Any is the project or domain wildcard of a binding.
const Any = "*"

// Key is an API key as stored (never its secret).
type Key struct {
	ID    int64 `gorm:"primaryKey"`
	KeyID string
	Name  string
	// SecretHash is the hex SHA-256 of the secret part.
	SecretHash string `json:"-"`
	Role       string
	Project    string
	Domain     string
	CreatedAt  time.Time
	RevokedAt  *time.Time
}

// TableName is migration 0014's table.
func (Key) TableName() string { return "api_keys" }

// Store keeps API keys in the database.
type Store struct{ db *gorm.DB }

// NewStore returns the store over g.
func NewStore(g *gorm.DB) *Store { return &Store{db: g} }

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ValidRole reports whether role is one of the three roles.
func ValidRole(role string) bool {
	return role == RoleViewer || role == RoleContributor || role == RoleAdmin
}

// Create stores a new key for name with role on project/domain and
// returns it with its secret (shown once).
func (s *Store) Create(ctx context.Context, name, role, project, domain string) (Key, string, error) {
	if !ValidRole(role) {
		return Key{}, "", errs.Invalidf("role must be viewer, contributor or admin, got %q", role)
	}
	if project == "" || domain == "" {
		return Key{}, "", errs.Invalidf("project and domain are required (%q for any)", Any)
	}
	id, secret, err := newKeyMaterial()
	if err != nil {
		return Key{}, "", err
	}
	k := Key{KeyID: id, Name: name, SecretHash: hashSecret(secret), Role: role, Project: project, Domain: domain, CreatedAt: time.Now().UTC()}
	if err := s.db.WithContext(ctx).Create(&k).Error; err != nil {
		return Key{}, "", fmt.Errorf("storing the API key: %w", db.Translate(err))
	}
	return k, secret, nil
}

// List returns every key, revoked ones included, oldest first.
func (s *Store) List(ctx context.Context) ([]Key, error) {
	var out []Key
	if err := s.db.WithContext(ctx).Order("id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing API keys: %w", db.Translate(err))
	}
	return out, nil
}

// Revoke marks the key revoked; it stops authenticating at once, and so do
// the tokens minted from it. Revoking a revoked key is not an error.
func (s *Store) Revoke(ctx context.Context, keyID string) error {
	res := s.db.WithContext(ctx).Model(&Key{}).Where("key_id = ?", keyID).
		Update("revoked_at", gorm.Expr("COALESCE(revoked_at, ?)", time.Now().UTC()))
	if res.Error != nil {
		return fmt.Errorf("revoking the API key: %w", db.Translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return errs.NotFoundf("API key %q", keyID)
	}
	return nil
}

// errNoKey is an unknown or revoked key.
var errNoKey = errors.New("no such active API key")

// active returns the unrevoked key keyID.
func (s *Store) active(ctx context.Context, keyID string) (Key, error) {
	var k Key
	err := s.db.WithContext(ctx).Where("key_id = ? AND revoked_at IS NULL", keyID).Take(&k).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Key{}, errNoKey
	}
	if err != nil {
		return Key{}, fmt.Errorf("reading the API key: %w", db.Translate(err))
	}
	return k, nil
}
