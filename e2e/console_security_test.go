package e2e

import (
	"testing"
)

// assertSameOrigin checks, from the page, that everything it loaded or
// called (assets, Connect calls, streams) came from its own origin: the
// console sends nothing, credentials included, anywhere else.
func assertSameOrigin(t *testing.T, b *browser) {
	t.Helper()
	foreign := eval[[]string](b, `performance.getEntriesByType("resource").map(e => e.name).filter(u => new URL(u).origin !== location.origin)`)
	if len(foreign) > 0 {
		t.Errorf("the console fetched from other origins: %v", foreign)
	}
	if n := eval[int](b, `performance.getEntriesByType("resource").length`); n == 0 {
		t.Error("no resource entries: the same-origin check saw nothing")
	}
}

// assertNoMarkup checks that no user string became markup: the page holds
// no script element besides the console's own module and no element a
// user string could have named.
func assertNoMarkup(t *testing.T, b *browser) {
	t.Helper()
	if n := eval[int](b, `document.querySelectorAll("body script, main b, main img").length`); n != 0 {
		t.Errorf("%d elements made from user strings", n)
	}
	if fired := eval[bool](b, `window.__xss === true`); fired {
		t.Error("a user string ran as script")
	}
}
