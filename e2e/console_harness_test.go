package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The console's browser tests drive Debian's headless Chromium with
// chromedp against a real manager. Every wait is for something on the page
// (a selector, a text), bounded generously: the machine may be loaded.
const browserWait = 2 * time.Minute

// chromium finds the browser: FM_CHROMIUM, else the usual binary names.
// .ci/run installs Debian's package, so a missing browser fails the test.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FM_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium for the console's browser tests: apt-get install chromium (or set FM_CHROMIUM)")
	return ""
}

// browser is one headless Chromium tab. Uncaught exceptions and console
// errors on the page fail the test: a view that throws is broken even when
// what the test looks for happens to show.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium at a laptop's width (width 0 means 1280),
// with extra options (a flag the test needs).
func newBrowser(t *testing.T, width int, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	if width == 0 {
		width = 1280
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t}
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.observe))
	b.ctx = ctx
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		cancel()
		cancelAlloc()
		t.Fatalf("starting Chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("console page: %s", e)
		}
	})
	return b
}

// observe runs on chromedp's reading goroutine: it only records.
func (b *browser) observe(ev any) {
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if x := e.ExceptionDetails.Exception; x != nil {
			msg += " " + x.Description
		}
		b.fail("uncaught exception: " + msg)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
			}
			b.fail("console.error: " + strings.Join(parts, " "))
		}
	}
}

func (b *browser) fail(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, msg)
}

// run performs steps in order, bounded together by browserWait, failing the
// test (with a screenshot of the page) on error.
func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.failed(what, err)
	}
}

func (b *browser) failed(what string, err error) {
	b.t.Helper()
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	b.screenshot("failed-" + sanitize(what))
	b.t.Fatalf("%s (page %s): %v", what, loc, err)
}

// pollEvery is how Poll waits here: checking every 100 ms, bounded by the
// step's browserWait context, not by chromedp's own 30 s default.
var pollEvery = []chromedp.PollOption{chromedp.WithPollingInterval(100 * time.Millisecond), chromedp.WithPollingTimeout(0)}

// discard runs a, dropping its value, so it can be a step of run.
func discard[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

// css is a CSS selector for the query actions (chromedp.Click(css("#x"))).
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// open navigates to url and waits for the console to have rendered main.
func (b *browser) open(url string) {
	b.t.Helper()
	b.run("open "+url, chromedp.Navigate(url), chromedp.WaitVisible(css("#main")))
}

// waitText waits until the element sel exists and its text contains want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want)
	b.run(fmt.Sprintf("wait for %q in %s", want, sel), discard(chromedp.Poll[bool](js, pollEvery...)))
}

// waitJS waits until the JavaScript expression js is truthy.
func (b *browser) waitJS(what, js string) {
	b.t.Helper()
	b.run(what, discard(chromedp.Poll[bool](js, pollEvery...)))
}

// eval evaluates a JavaScript expression on the page (awaiting a promise).
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.failed("evaluate "+js, err)
	}
	return v
}

// screenshot writes a full-page PNG of what is on screen to the artifacts
// directory (FM_TEST_ARTIFACTS, else .artifacts/console at the repository
// root), named after the test and name.
func (b *browser) screenshot(name string) string {
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	dir := os.Getenv("FM_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".artifacts", "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(dir, sanitize(b.t.Name())+"--"+sanitize(name)+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}
