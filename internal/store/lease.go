package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"fmgr.dev/internal/db"
	"fmgr.dev/internal/errs"
)

// LocalExecutorLease names the lease of the local executor.
const LocalExecutorLease = "local"

// ErrFenced: the write carried a lease token the lease no longer has (another
// manager took the lease over, or it was released). Nothing was written.
var ErrFenced = fmt.Errorf("the executor lease is no longer held with this token: %w", errs.ErrPrecondition)

// ErrLeaseTaken: the lease was not as observed (someone renewed, released or
// took it meanwhile).
var ErrLeaseTaken = fmt.Errorf("the executor lease changed meanwhile: %w", errs.ErrConflict)

// Lease is one executor lease row. A free lease has no Holder. Token grows at
// every acquisition and never goes back; Renewals moves at every renewal, so
// a standby can tell a live holder from a dead one by watching it on its own
// clock (holders' clocks are never compared).
type Lease struct {
	Name      string `gorm:"primaryKey"`
	Holder    string
	Token     int64
	Renewals  int64
	Host      string
	WorkDir   string
	RenewedAt *time.Time
	ExpiresAt *time.Time
}

func (Lease) TableName() string { return "executor_leases" }

// Leases is the repository of executor leases.
type Leases struct{ db *gorm.DB }

// Claimant is who takes a lease: a unique holder id (random per process,
// with its host and pid for people), its host and work directory.
type Claimant struct {
	Holder  string
	Host    string
	WorkDir string
}

// Get reads a lease.
func (r *Leases) Get(ctx context.Context, name string) (*Lease, error) {
	var l Lease
	if err := r.db.WithContext(ctx).Where("name = ?", name).Take(&l).Error; err != nil {
		return nil, fmt.Errorf("lease %s: %w", name, db.Translate(err))
	}
	return &l, nil
}

// Acquire gives the lease to c if it is still exactly as observed (same
// holder, token and renewals), with a new token, valid for ttl. Anything
// else yields ErrLeaseTaken.
func (r *Leases) Acquire(ctx context.Context, observed Lease, c Claimant, ttl time.Duration) (*Lease, error) {
	now := db.Now()
	exp := now.Add(ttl)
	res := r.db.WithContext(ctx).Model(&Lease{}).
		Where("name = ? AND holder = ? AND token = ? AND renewals = ?", observed.Name, observed.Holder, observed.Token, observed.Renewals).
		Updates(map[string]any{
			"holder": c.Holder, "token": observed.Token + 1, "renewals": 0, "host": c.Host, "work_dir": c.WorkDir,
			"renewed_at": now, "expires_at": exp,
		})
	if res.Error != nil {
		return nil, fmt.Errorf("acquire lease %s: %w", observed.Name, db.Translate(res.Error))
	}
	if res.RowsAffected != 1 {
		return nil, ErrLeaseTaken
	}
	return &Lease{Name: observed.Name, Holder: c.Holder, Token: observed.Token + 1, Host: c.Host, WorkDir: c.WorkDir,
		RenewedAt: &now, ExpiresAt: &exp}, nil
}

// Renew extends a held lease by ttl. ErrFenced means it is no longer held
// with token by holder.
func (r *Leases) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) error {
	now := db.Now()
	res := r.db.WithContext(ctx).Model(&Lease{}).
		Where("name = ? AND holder = ? AND token = ?", name, holder, token).
		Updates(map[string]any{"renewals": gorm.Expr("renewals + 1"), "renewed_at": now, "expires_at": now.Add(ttl)})
	if res.Error != nil {
		return fmt.Errorf("renew lease %s: %w", name, db.Translate(res.Error))
	}
	if res.RowsAffected != 1 {
		return ErrFenced
	}
	return nil
}

// Release frees a held lease (a graceful stop), so a standby can take it at
// once. Releasing a lease no longer held is not an error.
func (r *Leases) Release(ctx context.Context, name, holder string, token int64) error {
	err := r.db.WithContext(ctx).Model(&Lease{}).
		Where("name = ? AND holder = ? AND token = ?", name, holder, token).
		Updates(map[string]any{"holder": "", "renewals": gorm.Expr("renewals + 1"), "expires_at": db.Now()}).Error
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, db.Translate(err))
	}
	return nil
}

// fenceSQL locks the lease row while it still holds token (checkFence).
const fenceSQL = "UPDATE executor_leases SET token = token WHERE name = ? AND token = ? AND holder <> ''"

// checkFence makes tx commit only while the local executor's lease is held
// with token. The UPDATE locks the lease row until tx ends, so a takeover
// (which updates the row) waits for this write to commit, or this write
// sees the takeover and fails: either way the new holder reads everything
// the old one recorded, and the old one records nothing after it.
func checkFence(tx *gorm.DB, token int64) error {
	res := tx.Exec(fenceSQL, LocalExecutorLease, token)
	if res.Error != nil {
		return fmt.Errorf("check the executor lease: %w", db.Translate(res.Error))
	}
	if res.RowsAffected != 1 {
		return ErrFenced
	}
	return nil
}
