package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// ErrNoNotifications is Listen's answer on SQLite: every writer of an
// SQLite database is this process, which tells its listeners itself.
var ErrNoNotifications = errors.New("the database sends no notifications")

// listenCheck is how long Listen waits for a notification before it checks
// that its connection still answers: a server that vanished without closing
// the socket is noticed within about this long.
const listenCheck = 30 * time.Second

// Listen LISTENs on channel on a PostgreSQL connection of its own (not one
// of the pool's, which it would hold forever), calls connected once the
// LISTEN is in place and notify with the payload of every notification. It
// returns nil when ctx ends and an error when the connection is lost; the
// caller reconnects by calling it again, and must assume it missed
// notifications in between (catch up after connected).
func Listen(ctx context.Context, g *gorm.DB, channel string, connected func(), notify func(payload string)) error {
	if Dialect(g) != Postgres {
		return ErrNoNotifications
	}
	cfg, err := connConfig(ctx, g)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to listen: %w", Translate(err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return listenErr(ctx, err)
	}
	connected()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			notify(n.Payload)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			if err := conn.Ping(ctx); err != nil {
				return listenErr(ctx, err)
			}
		default:
			return listenErr(ctx, err)
		}
	}
}

func listenErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("listening for notifications: %w", Translate(err))
}

// connConfig is the configuration of g's pool connections, taken from one
// of them, so a listener connects exactly as the pool does.
func connConfig(ctx context.Context, g *gorm.DB) (*pgx.ConnConfig, error) {
	sqlDB, err := g.DB()
	if err != nil {
		return nil, err
	}
	c, err := sqlDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to listen: %w", Translate(err))
	}
	defer c.Close()
	var cfg *pgx.ConnConfig
	err = c.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("listen: the PostgreSQL driver connection is a %T, not pgx's", dc)
		}
		cfg = pc.Conn().Config()
		// The copy still delivers notifications to the pool connection's
		// buffer; unset, the new connection buffers its own.
		cfg.OnNotification = nil
		return nil
	})
	return cfg, err
}
