package compose

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"fmgr.dev/internal/config"
	"fmgr.dev/internal/server"
)

// A busy console address is logged and skipped; a free one is bound.
func TestListenConsole(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := config.Default()
	cfg.Console.LocalListen = busy.Addr().String()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	srv := server.New(cfg.Server, logger)
	defer srv.Close()
	if got := listenConsole(logger, &cfg, srv); got != nil {
		t.Errorf("listenConsole on a busy port bound %v", got)
	}
	if !strings.Contains(logs.String(), "not serving the console") || !strings.Contains(logs.String(), busy.Addr().String()) {
		t.Errorf("no warning naming the busy address:\n%s", logs.String())
	}

	cfg.Console.LocalListen = "127.0.0.1:0"
	if got := listenConsole(logger, &cfg, srv); got == nil {
		t.Errorf("listenConsole on a free port bound nothing:\n%s", logs.String())
	}
	cfg.Server.Port = 9000 // the SDK's links then name 9000: no second listener
	if got := listenConsole(logger, &cfg, srv); got != nil {
		t.Errorf("listenConsole with server.port 9000 bound %v", got)
	}
}
