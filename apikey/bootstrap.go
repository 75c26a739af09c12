package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
)

// BootstrapName is the name the bootstrap key is listed under.
const BootstrapName = "bootstrap-admin"

// EnsureBootstrap stores the admin key keyID:secret (auth.bootstrapKey,
// config.ParseBootstrapKey) (any project and
// domain) unless a key keyID exists already, revoked or not: a deployment
// that provides its first key (the chart does) has it at every start, and
// `apikey revoke` still ends it for good. It reports whether it stored it.
func (s *Store) EnsureBootstrap(ctx context.Context, keyID, secret string) (bool, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&Key{}).Where("key_id = ?", keyID).Count(&n).Error; err != nil {
		return false, fmt.Errorf("reading the API keys: %w", db.Translate(err))
	}
	if n > 0 {
		return false, nil
	}
	k := Key{KeyID: keyID, Name: BootstrapName, SecretHash: hashSecret(secret), Role: RoleAdmin, Project: Any, Domain: Any, CreatedAt: time.Now().UTC()}
	err := s.db.WithContext(ctx).Create(&k).Error
	if err != nil {
		// Another replica stored it first (key_id is unique).
		var again int64
		if cerr := s.db.WithContext(ctx).Model(&Key{}).Where("key_id = ?", keyID).Count(&again).Error; cerr == nil && again > 0 {
			return false, nil
		}
		if errors.Is(err, gorm.ErrDuplicatedKey) {
			return false, nil
		}
		return false, fmt.Errorf("storing the bootstrap API key: %w", db.Translate(err))
	}
	return true, nil
}
