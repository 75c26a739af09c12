package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestHaltResumeKeepsData: a halted server refuses connections; resumed, it
// answers on the same DSN with the rows written before the halt.
func TestHaltResumeKeepsData(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Halt(); err != nil {
			t.Error(err)
		}
		s.Stop()
	})
	dsn := s.DSN("postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := exec("SELECT 1"); err == nil {
		t.Fatal("a halted server still answers")
	}
	if err := s.Halt(); err != nil {
		t.Fatalf("halting a halted server: %v", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("resumed server: %v", err)
	}
	defer conn.Close(context.Background())
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("row after resume: %d, %v", v, err)
	}
}
