package secret

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/db"
)

// Rotation is what Rotate did.
type Rotation struct {
	// NewKeyID seals every value now.
	NewKeyID string
	// Retired are the ids of the keys taken out of the keyring.
	Retired []string
	// Resealed counts the values sealed again under the new key.
	Resealed int
}

// Rotate puts a new key into the keyring file of cfg, seals every stored
// value again under it and then retires the old keys, without stopping any
// manager: each one re-reads the keyring file before it uses it, so it
// opens values under either key while the rotation runs and seals new ones
// under the new key as soon as the file names it first.
//
//  1. the file becomes [new, old...]: the new key seals, the old ones open;
//  2. every value not under the new key is sealed again under it;
//  3. the file becomes [new];
//  4. one more pass seals again what a manager that had read the file
//     before step 1 sealed under an old key meanwhile (a manager that
//     writes after this pass reads the new file and does it itself: see
//     Store.resealIfRetired).
func Rotate(ctx context.Context, g *gorm.DB, cfg config.Secrets, home string) (Rotation, error) {
	if cfg.Key != "" {
		return Rotation{}, errors.New("secrets.key is a fixed key and cannot be rotated: " +
			"move the key into a keyring file (secrets.keyFile) to rotate it")
	}
	current, err := OpenKeyring(cfg, home) // creates the default keyring if it is missing
	if err != nil {
		return Rotation{}, err
	}
	path := current.Path()
	old, err := ReadKeyringFile(path)
	if err != nil {
		return Rotation{}, err
	}
	fresh, err := NewKey()
	if err != nil {
		return Rotation{}, err
	}
	all := &Keyring{}
	if err := all.set(append([]Key{fresh}, old...)); err != nil {
		return Rotation{}, err
	}
	if err := WriteKeyringFile(path, append([]Key{fresh}, old...)); err != nil {
		return Rotation{}, err
	}
	s := NewStore(g, all)
	rot := Rotation{NewKeyID: fresh.ID}
	n, err := s.resealAll(ctx, fresh.ID)
	rot.Resealed += n
	if err != nil {
		return rot, fmt.Errorf("sealing values under the new key (the keyring keeps the old keys, so run rotate-key again): %w", err)
	}
	if err := WriteKeyringFile(path, []Key{fresh}); err != nil {
		return rot, err
	}
	for _, k := range old {
		rot.Retired = append(rot.Retired, k.ID)
	}
	n, err = s.resealAll(ctx, fresh.ID)
	rot.Resealed += n
	if err != nil {
		// The retired keys are in memory only now: put them back so that
		// what is left under them stays readable.
		if werr := WriteKeyringFile(path, append([]Key{fresh}, old...)); werr != nil {
			return rot, errors.Join(err, werr)
		}
		rot.Retired = nil
		return rot, fmt.Errorf("sealing the last values under the new key (the old keys were put back; run rotate-key again): %w", err)
	}
	return rot, nil
}

// resealAll seals every value not under key active again under it, in
// batches, and returns how many it sealed.
func (s *Store) resealAll(ctx context.Context, active string) (int, error) {
	total := 0
	var after int64
	for {
		var rows []row
		err := s.db.WithContext(ctx).Where("key_id <> ? AND id > ?", active, after).Order("id").Limit(100).Find(&rows).Error
		if err != nil {
			return total, fmt.Errorf("list secrets to reseal: %w", db.Translate(err))
		}
		if len(rows) == 0 {
			return total, nil
		}
		for i := range rows {
			ok, err := s.reseal(ctx, &rows[i])
			if err != nil {
				return total, err
			}
			if ok {
				total++
			}
		}
		after = rows[len(rows)-1].ID
	}
}

// reseal seals r's value again under the active key, unless the row changed
// since it was read (someone else sealed it afresh, or deleted it).
func (s *Store) reseal(ctx context.Context, r *row) (bool, error) {
	id := r.id()
	value, err := s.keys.Open(r.KeyID, id.additionalData(), r.Value)
	if err != nil {
		return false, fmt.Errorf("secret %s: %w", id, err)
	}
	keyID, blob, err := s.keys.Seal(id.additionalData(), value)
	if err != nil {
		return false, err
	}
	res := s.db.WithContext(ctx).Model(&row{}).Where("id = ? AND key_id = ? AND value = ?", r.ID, r.KeyID, r.Value).
		Updates(map[string]any{"key_id": keyID, "value": blob})
	if res.Error != nil {
		return false, fmt.Errorf("reseal secret %s: %w", id, db.Translate(res.Error))
	}
	return res.RowsAffected == 1, nil
}
