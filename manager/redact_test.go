package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// No command shows a DSN's secrets: not `config`, not a failed `start` (the
// database open error), whatever form the DSN takes.
func TestCommandsHideDatabaseSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String() // nobody listens once closed
	l.Close()
	for _, dsn := range []string{
		"postgres://fm:urlSecret1@" + addr + "/fm?connect_timeout=5&sslmode=disable",
		"postgres://fm@" + addr + "/fm?connect_timeout=5&sslmode=disable&PassWord=querySecret2&sslpassword=sslSecret3",
		"postgres://fm:bad#Secret4@" + addr + "/fm",
	} {
		for _, cmd := range []string{"config", "start"} {
			home := isolate(t)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{cmd, "--home", home, "--port", "0", "--db", dsn}, &stdout, &stderr)
			if cmd == "start" && code == 0 {
				t.Errorf("start with an unreachable database succeeded")
			}
			out := stdout.String() + stderr.String()
			for _, secret := range []string{"Secret1", "Secret2", "Secret3", "Secret4"} {
				if strings.Contains(out, secret) {
					t.Errorf("%s with DSN %q shows %s:\n%s", cmd, dsn, secret, out)
				}
			}
		}
	}
}
