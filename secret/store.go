package secret

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
	"fmgr.dev/internal/store"
)

// Scope is where a secret lives: Org alone is org-wide, Org and Domain is
// domain-wide, all three is one project's domain.
type Scope struct {
	Org, Domain, Project string
}

// ID names one secret.
type ID struct {
	Scope
	Name string
}

func (id ID) String() string {
	switch {
	case id.Project != "":
		return fmt.Sprintf("%q (project %s, domain %s)", id.Name, id.Project, id.Domain)
	case id.Domain != "":
		return fmt.Sprintf("%q (domain %s)", id.Name, id.Domain)
	}
	return fmt.Sprintf("%q (org-wide)", id.Name)
}

// additionalData binds a sealed value to its secret: the scope and name,
// each part length-prefixed so no two ids share it.
func (id ID) additionalData() []byte {
	b := []byte("flyte-manager secret v1")
	for _, p := range []string{id.Org, id.Domain, id.Project, id.Name} {
		b = fmt.Appendf(b, "\x00%d:%s", len(p), p)
	}
	return b
}

// row is a row of secrets (migration 0005). Value is sealed (keyring.go).
type row struct {
	ID        int64 `gorm:"primaryKey"`
	Org       string
	Domain    string
	Project   string
	Name      string
	Type      int32
	KeyID     string
	Value     []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (row) TableName() string { return "secrets" }

func (r *row) id() ID {
	return ID{Scope: Scope{Org: r.Org, Domain: r.Domain, Project: r.Project}, Name: r.Name}
}

// Meta is what may be told about a secret: everything but its value.
type Meta struct {
	ID        ID
	Type      int32
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (r *row) meta() Meta {
	return Meta{ID: r.id(), Type: r.Type, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// Store is the secrets repository: values go in sealed and come out only
// through Resolve, for the attempts that request them.
type Store struct {
	db   *gorm.DB
	keys *Keyring
}

// NewStore returns the repository over g, sealing with keys.
func NewStore(g *gorm.DB, keys *Keyring) *Store { return &Store{db: g, keys: keys} }

func where(q *gorm.DB, id ID) *gorm.DB {
	return q.Where("org = ? AND domain = ? AND project = ? AND name = ?", id.Org, id.Domain, id.Project, id.Name)
}

// Create stores a new secret; an existing one yields errs.ErrAlreadyExists.
func (s *Store) Create(ctx context.Context, id ID, typ int32, value []byte) error {
	keyID, blob, err := s.keys.Seal(id.additionalData(), value)
	if err != nil {
		return err
	}
	now := db.Now()
	r := &row{Org: id.Org, Domain: id.Domain, Project: id.Project, Name: id.Name, Type: typ,
		KeyID: keyID, Value: blob, CreatedAt: now, UpdatedAt: now}
	if err := s.db.WithContext(ctx).Create(r).Error; err != nil {
		err = db.Translate(err)
		if errors.Is(err, errs.ErrAlreadyExists) {
			return fmt.Errorf("secret %s: %w", id, errs.ErrAlreadyExists)
		}
		return fmt.Errorf("create secret: %w", err)
	}
	return s.resealIfRetired(ctx, id, keyID)
}

// Update replaces a secret's value and type; a missing one yields
// errs.ErrNotFound.
func (s *Store) Update(ctx context.Context, id ID, typ int32, value []byte) error {
	keyID, blob, err := s.keys.Seal(id.additionalData(), value)
	if err != nil {
		return err
	}
	res := where(s.db.WithContext(ctx).Model(&row{}), id).
		Updates(map[string]any{"type": typ, "key_id": keyID, "value": blob, "updated_at": db.Now()})
	if res.Error != nil {
		return fmt.Errorf("update secret: %w", db.Translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return errs.NotFoundf("secret %s", id)
	}
	return s.resealIfRetired(ctx, id, keyID)
}

// resealIfRetired closes the race with a key rotation that retired the key
// a value was just sealed under (this manager had read the keyring before
// it was rewritten): the rotation's last pass sees the row, or this check
// sees the new keyring and seals the value again under its active key.
func (s *Store) resealIfRetired(ctx context.Context, id ID, keyID string) error {
	ok, err := s.keys.Has(keyID)
	if err != nil || ok {
		return err
	}
	var r row
	if err := where(s.db.WithContext(ctx), id).Take(&r).Error; err != nil {
		return fmt.Errorf("secret %s: %w", id, db.Translate(err))
	}
	_, err = s.reseal(ctx, &r)
	return err
}

// Get returns a secret's metadata.
func (s *Store) Get(ctx context.Context, id ID) (Meta, error) {
	var r row
	err := where(s.db.WithContext(ctx).Omit("value"), id).Take(&r).Error
	if err != nil {
		if err = db.Translate(err); errors.Is(err, errs.ErrNotFound) {
			return Meta{}, errs.NotFoundf("secret %s", id)
		}
		return Meta{}, fmt.Errorf("get secret: %w", err)
	}
	return r.meta(), nil
}

// Delete removes a secret; a missing one yields errs.ErrNotFound.
func (s *Store) Delete(ctx context.Context, id ID) error {
	res := where(s.db.WithContext(ctx), id).Delete(&row{})
	if res.Error != nil {
		return fmt.Errorf("delete secret: %w", db.Translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return errs.NotFoundf("secret %s", id)
	}
	return nil
}

// List returns the secrets of an org ordered by name: all of them when
// scope names no domain, the domain's (domain-wide and its projects') when
// it names one, one project's domain when it names both.
func (s *Store) List(ctx context.Context, scope Scope, page store.Page) ([]Meta, string, error) {
	query := "secrets"
	after, err := store.DecodeNameToken(query, page.Token)
	if err != nil {
		return nil, "", err
	}
	q := s.db.WithContext(ctx).Omit("value").Where("org = ?", scope.Org)
	if scope.Domain != "" {
		q = q.Where("domain = ?", scope.Domain)
	}
	if scope.Project != "" {
		q = q.Where("project = ?", scope.Project)
	}
	if after != nil {
		q = q.Where("(name, id) > (?, ?)", after.Name, after.ID)
	}
	limit := page.Size()
	var rows []row
	if err := q.Order("name, id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("list secrets: %w", db.Translate(err))
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		next = store.NameToken(query, last.Name, last.ID)
	}
	out := make([]Meta, len(rows))
	for i := range rows {
		out[i] = rows[i].meta()
	}
	return out, next, nil
}

// Resolve finds the value of secret name for an attempt of scope: the
// project's domain first, then the domain, then the org. ok is false when
// none holds it.
func (s *Store) Resolve(ctx context.Context, scope Scope, name string) (value []byte, ok bool, err error) {
	candidates := []Scope{scope, {Org: scope.Org, Domain: scope.Domain}, {Org: scope.Org}}
	for i, sc := range candidates {
		if i > 0 && sc == candidates[i-1] {
			continue // scope was already domain-wide or org-wide
		}
		var r row
		err := where(s.db.WithContext(ctx), ID{Scope: sc, Name: name}).Take(&r).Error
		if err = db.Translate(err); errors.Is(err, errs.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, false, fmt.Errorf("look up secret %q: %w", name, err)
		}
		v, err := s.keys.Open(r.KeyID, r.id().additionalData(), r.Value)
		if err != nil {
			return nil, false, fmt.Errorf("secret %s: %w", r.id(), err)
		}
		return v, true, nil
	}
	return nil, false, nil
}
