package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"

	"fmgr.dev/console"
)

// The console runner: the time headless Chromium takes to draw a run's
// action tree of 1,000 and of 10,000 actions through the console's own
// tree module (console.TreeRenderScript), folded (the root and one row
// counting the fan-out) and with the fan-out open (a row per action). The
// browser test checks what is drawn; this prints how long it took.

// consoleSizes are the trees drawn; consoleRepeats draws of each, the
// median printed.
var consoleSizes = []int{1000, 10000}

const consoleRepeats = 5

// consoleTarget is what a draw is held to: a 1,000-action tree within two
// frames (the page stays responsive while a fan-out arrives), a
// 10,000-action one within half a second.
var consoleTarget = map[int]map[string]time.Duration{
	1000:  {"folded": 33 * time.Millisecond, "open": 100 * time.Millisecond},
	10000: {"folded": 100 * time.Millisecond, "open": 500 * time.Millisecond},
}

type consoleFigures struct {
	n                  int
	folded, open       time.Duration
	foldedRows, opened int
}

// chromiumPath finds the browser as the console's browser tests do:
// FM_CHROMIUM, else the usual binary names.
func chromiumPath() (string, error) {
	if p := os.Getenv("FM_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("the console runner needs Chromium: apt-get install chromium (or set FM_CHROMIUM)")
}

// runConsole starts a manager on SQLite, opens its console in headless
// Chromium and times the tree's draws.
func runConsole(ctx context.Context, o options, tmp string) (func(io.Writer), error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	exe, err := chromiumPath()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(tmp, "console")
	m, err := startManager(ctx, o.managerBin, home, "sqlite://"+filepath.Join(home, "fm.db"), nil, nil, false)
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(m.URL+"/v2/projects"), chromedp.WaitVisible(chromedp.CSS("#projects"))); err != nil {
		return nil, fmt.Errorf("opening the console: %w (manager log: %s)", err, m.LogPath)
	}
	var figs []consoleFigures
	for _, n := range consoleSizes {
		var folded, open []time.Duration
		f := consoleFigures{n: n}
		for range consoleRepeats {
			v, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]any](console.TreeRenderScript(n), chromedp.EvalAwaitPromise))
			if err != nil {
				return nil, fmt.Errorf("drawing %d actions: %w", n, err)
			}
			folded = append(folded, ms(v["folded"]))
			open = append(open, ms(v["open"]))
			f.foldedRows, f.opened = rows(v["foldedRows"]), rows(v["openRows"])
		}
		if f.foldedRows != 2 || f.opened != n+1 {
			return nil, fmt.Errorf("%d actions drew %d rows folded and %d open, want 2 and %d", n, f.foldedRows, f.opened, n+1)
		}
		f.folded, f.open = median(folded), median(open)
		fmt.Fprintf(os.Stderr, "bench: console: %d actions: %s folded, %s open\n", n, round(f.folded), round(f.open))
		figs = append(figs, f)
	}
	return func(out io.Writer) {
		fmt.Fprintf(out, "\nconsole: drawing a run's action tree in headless Chromium (median of %d draws)\n", consoleRepeats)
		for _, f := range figs {
			for _, k := range []struct {
				what string
				d    time.Duration
				rows int
			}{{"folded", f.folded, f.foldedRows}, {"open", f.open, f.opened}} {
				target := consoleTarget[f.n][k.what]
				fmt.Fprintf(out, "  %6d actions, %-6s (%5d rows): %8s  (target ≤ %s: %.2f× the target)\n",
					f.n, k.what, k.rows, round(k.d), target, float64(k.d)/float64(target))
			}
		}
	}, nil
}

func ms(v any) time.Duration {
	f, _ := v.(float64)
	return time.Duration(f * float64(time.Millisecond))
}

func rows(v any) int {
	f, _ := v.(float64)
	return int(f)
}
