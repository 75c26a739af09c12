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

// assertNoMarkup checks that no user string became markup: the body holds
// no script element (the console's own module is in the head) and none of
// the elements the tests' strings name. That the strings show as text is
// checked where each is shown.
func assertNoMarkup(t *testing.T, b *browser) {
	t.Helper()
	if n := eval[int](b, `document.querySelectorAll("body script, main b, main img").length`); n != 0 {
		t.Errorf("%d elements made from user strings", n)
	}
}
