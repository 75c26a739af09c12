package console_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The console builds DOM only through lib/dom.js, which never parses
// markup. A script that used any other way the browser turns a string into
// markup, code, a navigation or a loaded resource could let a user string
// (a task name, an output, a log line) run in the console's origin. The
// test scans every script for every such sink; the few reviewed uses are
// listed in allowed with the reason they are safe, and counted, so a new
// use of a listed sink needs its own review too.

// A sink is one kind of DOM sink and a pattern that finds it in a script
// whose comments are blanked out (string literals are kept: a javascript:
// URL or a string handed to a timer is in one).
type sink struct {
	name string
	re   *regexp.Regexp
	// keep, when set, says whether a match is a finding.
	keep func(match string) bool
}

var sinks = []sink{
	{"markup property", regexp.MustCompile(`\b(innerHTML|outerHTML)\b`), nil},
	{"insertAdjacentHTML", regexp.MustCompile(`\binsertAdjacentHTML\b`), nil},
	{"document.write", regexp.MustCompile(`\bdocument\s*\.\s*write(ln)?\b`), nil},
	{"eval", regexp.MustCompile(`\beval\s*\(`), nil},
	{"Function constructor", regexp.MustCompile(`\bFunction\s*\(`), nil},
	{"timer with a string", regexp.MustCompile(`\bset(Timeout|Interval|Immediate)\s*\(\s*['"` + "`" + `]`), nil},
	{"timer with a named callback", regexp.MustCompile(`\bset(Timeout|Interval|Immediate)\s*\(\s*[A-Za-z_$][\w$.]*\s*[,)]`), nil},
	{"srcdoc", regexp.MustCompile(`\bsrcdoc\b`), nil},
	{"setAttribute with a computed name", regexp.MustCompile(`\bsetAttribute(NS)?\s*\(\s*[^'"` + "`" + `\s]`), nil},
	{"setAttribute of a handler, URL or style", regexp.MustCompile(`(?i)\bsetAttribute(NS)?\s*\(\s*['"` + "`" + `](on\w*|href|src|srcset|action|formaction|xlink:href|data|poster|style|srcdoc|background|ping|cite)['"` + "`" + `]`), nil},
	{"handler property", regexp.MustCompile(`\.\s*on[a-z]+\s*=[^=]`), nil},
	{"URL property", regexp.MustCompile(`\.\s*(href|src|srcset|action|formAction|data|poster|codebase)\s*=[^=]`), nil},
	{"location change", regexp.MustCompile(`\blocation\s*=[^=]|\blocation\s*\.\s*(href|protocol|host|hostname|pathname|search|hash|port)\s*=[^=]|\blocation\s*\.\s*(assign|replace|reload)\s*\(|\bwindow\s*\.\s*open\s*\(`), nil},
	{"script URL", regexp.MustCompile(`(?i)\b(javascript|vbscript)\s*:|data:\s*text/html`), nil},
	{"markup parser", regexp.MustCompile(`\b(createContextualFragment|DOMParser|parseFromString|setHTMLUnsafe|parseHTMLUnsafe|createHTMLDocument|XSLTProcessor|execCommand|createRange)\b|\bdocument\s*\.\s*implementation\b`), nil},
	{"markup in a string", regexp.MustCompile(`(?i)<\s*/?\s*(script|iframe|img|svg|object|embed|style|math)\b`), nil},
	{"element that loads or runs code", regexp.MustCompile(`(?i)\b(createElement(NS)?|h)\s*\(\s*['"` + "`" + `](iframe|frame|object|embed|script|base|meta|link|style|svg|math)['"` + "`" + `]`), nil},
	{"element with a computed name", regexp.MustCompile(`\bcreateElement(NS)?\s*\(\s*[^'"` + "`" + `\s]`), nil},
	{"CSS text", regexp.MustCompile(`\b(cssText|insertRule|replaceSync|CSSStyleSheet|adoptedStyleSheets)\b|\bsetProperty\s*\(|\.\s*style\s*=[^=]`), nil},
	{"style from an object", regexp.MustCompile(`\bObject\s*\.\s*assign\s*\(\s*[\w$.]*\.\s*style\b`), nil},
	{"blob URL", regexp.MustCompile(`\bcreateObjectURL\b`), nil},
	{"computed import", regexp.MustCompile(`\bimport\s*\(\s*[^'"` + "`" + `\s]`), nil},
	{"cross-window messages", regexp.MustCompile(`\b(postMessage|onmessage|MessageChannel|BroadcastChannel)\b|addEventListener\s*\(\s*['"` + "`" + `]message['"` + "`" + `]`), nil},
	{"worker", regexp.MustCompile(`\bnew\s+(Shared)?Worker\b|\bimportScripts\b|\bserviceWorker\b`), nil},
}

// allowance is a reviewed use of a sink: file (relative to web/), the sink,
// how many times it occurs there, and why it is safe.
type allowance struct {
	file, sink string
	count      int
	reason     string
}

var allowed = []allowance{
	{"assets/lib/dom.js", "setAttribute with a computed name", 2,
		"h()'s attribute loop: it refuses on* strings, srcdoc and CSS text, and leaves out URL attributes whose scheme is not http(s) or blob"},
	{"assets/lib/dom.js", "element with a computed name", 1,
		"h() itself: it refuses script, object, embed, base, frame, meta, link, style and template, and an iframe without a sandbox"},
	{"assets/lib/dom.js", "style from an object", 1,
		"h()'s style attribute: CSSOM properties set one by one (no CSS text is parsed); callers pass numbers the console computes (indent, timeline position)"},
	{"assets/lib/dom.js", "srcdoc", 2,
		"the guard itself: h() throws on a srcdoc attribute (its test and its message)"},
	{"assets/views/run/panel.js", "element that loads or runs code", 1,
		"the report iframe: src is the manager's signed same-origin link, sandbox is allow-scripts without allow-same-origin, so the report runs in an opaque origin (e2e TestConsoleRun checks the attribute)"},
	{"assets/views/run/logs.js", "blob URL", 1,
		"the log download: a text/plain blob of the log lines with a download attribute, never framed or navigated to"},
	{"assets/views/run/logs.js", "timer with a named callback", 1,
		"a backoff wait: the callback is a Promise's resolve function"},
	{"assets/lib/literals.js", "blob URL", 1,
		"a binary literal's download: an application/octet-stream blob with a download attribute"},
	{"assets/lib/api.js", "timer with a named callback", 1,
		"follow()'s reconnect backoff: the callback is a Promise's resolve function"},
}

// finding is one use of a sink at a line of a file.
type finding struct {
	file, sink string
	line       int
	text       string
}

func (f finding) String() string { return fmt.Sprintf("%s:%d: %s: %s", f.file, f.line, f.sink, f.text) }

// scanDir scans every .js and .html file under root.
func scanDir(t *testing.T, root string) []finding {
	t.Helper()
	var out []finding
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := filepath.Ext(path)
		if ext != ".js" && ext != ".mjs" && ext != ".html" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if ext == ".html" {
			out = append(out, scanHTML(filepath.ToSlash(rel), string(src))...)
		} else {
			out = append(out, scanJS(filepath.ToSlash(rel), string(src))...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scanJS reports every sink in a script, comments aside.
func scanJS(file, src string) []finding {
	code := blankComments(src)
	var out []finding
	for _, s := range sinks {
		for _, m := range s.re.FindAllStringIndex(code, -1) {
			line := strings.Count(code[:m[0]], "\n") + 1
			out = append(out, finding{file, s.name, line, strings.TrimSpace(strings.Split(src, "\n")[line-1])})
		}
	}
	return out
}

// htmlSinks are what the page itself may not carry: inline script (the
// CSP refuses it, and the test keeps the page from needing it), inline
// handlers, script URLs and frames.
var scriptSrc = regexp.MustCompile(`(?i)\ssrc\s*=`)

var htmlSinks = []sink{
	{"inline script", regexp.MustCompile(`(?is)<script\b[^>]*>\s*[^<\s]`), nil},
	{"script without a src", regexp.MustCompile(`(?i)<script\b[^>]*>`), func(m string) bool { return !scriptSrc.MatchString(m) }},
	{"inline handler", regexp.MustCompile(`(?i)<[^>]*\son[a-z]+\s*=`), nil},
	{"script URL", regexp.MustCompile(`(?i)\b(javascript|vbscript)\s*:|data:\s*text/html`), nil},
	{"frame", regexp.MustCompile(`(?i)<\s*(iframe|frame|object|embed|base)\b|\bsrcdoc\b`), nil},
}

func scanHTML(file, src string) []finding {
	var out []finding
	for _, s := range htmlSinks {
		for _, m := range s.re.FindAllStringIndex(src, -1) {
			if s.keep != nil && !s.keep(src[m[0]:m[1]]) {
				continue
			}
			line := strings.Count(src[:m[0]], "\n") + 1
			out = append(out, finding{file, s.name, line, strings.TrimSpace(strings.Split(src, "\n")[line-1])})
		}
	}
	return out
}

// blankComments replaces every comment in a script by spaces (keeping its
// newlines, so line numbers hold), leaving code and string literals. It
// knows strings, template literals with ${} nesting and regular
// expression literals, so a "//" in a URL or a regex is not a comment.
func blankComments(src string) string {
	b := []byte(src)
	const (
		code = iota
		str
		tmpl
		regex
	)
	var stack []int // template nesting: brace depth at each ${
	depth := 0      // brace depth in code
	state, quote := code, byte(0)
	inClass := false  // inside [...] of a regex literal
	prev := byte('(') // the last non-space code character, to tell / apart
	blank := func(from, to int) {
		for k := from; k < to; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch state {
		case code:
			switch {
			case c == '/' && i+1 < len(b) && b[i+1] == '/':
				j := i
				for j < len(b) && b[j] != '\n' {
					j++
				}
				blank(i, j)
				i = j - 1
				continue
			case c == '/' && i+1 < len(b) && b[i+1] == '*':
				j := strings.Index(src[i+2:], "*/")
				end := len(b)
				if j >= 0 {
					end = i + 2 + j + 2
				}
				blank(i, end)
				i = end - 1
				continue
			case c == '/' && strings.IndexByte("(,=:[!&|?{};+-*%<>~^", prev) >= 0:
				state, inClass = regex, false
			case c == '\'' || c == '"':
				state, quote = str, c
			case c == '`':
				state = tmpl
			case c == '{':
				depth++
			case c == '}':
				if n := len(stack); n > 0 && stack[n-1] == depth {
					stack = stack[:n-1]
					state = tmpl
					continue
				}
				depth--
			}
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				prev = c
			}
		case str:
			if c == '\\' {
				i++
			} else if c == quote || c == '\n' {
				state, prev = code, 'a'
			}
		case tmpl:
			if c == '\\' {
				i++
			} else if c == '`' {
				state, prev = code, 'a'
			} else if c == '$' && i+1 < len(b) && b[i+1] == '{' {
				stack = append(stack, depth)
				state, prev = code, '('
				i++
			}
		case regex:
			switch {
			case c == '\\':
				i++
			case c == '[':
				inClass = true
			case c == ']':
				inClass = false
			case c == '/' && !inClass, c == '\n':
				state, prev = code, 'a'
			}
		}
	}
	return string(b)
}

// check compares findings with the allow-list: every finding must be
// allowed, and every allowance must be used exactly count times. It
// returns what is wrong, one line each.
func check(found []finding, allow []allowance) []string {
	var bad []string
	seen := map[[2]string][]finding{}
	for _, f := range found {
		k := [2]string{f.file, f.sink}
		seen[k] = append(seen[k], f)
	}
	listed := map[[2]string]bool{}
	for _, a := range allow {
		k := [2]string{a.file, a.sink}
		listed[k] = true
		if got := len(seen[k]); got != a.count {
			var where []string
			for _, f := range seen[k] {
				where = append(where, f.String())
			}
			bad = append(bad, fmt.Sprintf("%s: %s is allowed %d times (%s), found %d: %s", a.file, a.sink, a.count, a.reason, got, strings.Join(where, "; ")))
		}
	}
	for k, fs := range seen {
		if listed[k] {
			continue
		}
		for _, f := range fs {
			bad = append(bad, "not allowed: "+f.String())
		}
	}
	slices.Sort(bad)
	return bad
}

func TestNoAssetUsesADOMSink(t *testing.T) {
	found := scanDir(t, "web")
	if len(found) == 0 {
		t.Fatal("the scan found nothing, not even the reviewed uses: is it reading web/?")
	}
	for _, msg := range check(found, allowed) {
		t.Error(msg)
	}
	for _, a := range allowed {
		if a.count > 0 && a.reason == "" {
			t.Errorf("%s: %s is allowed without a reason", a.file, a.sink)
		}
	}
}

// The scan on a synthetic script: every banned sink is found, on its line,
// and nothing in comments, in a URL string with "//" or after a regex with
// a quote in it is taken for code (or hides code).
func TestSinkScanFindsEverySink(t *testing.T) {
	src := strings.Join([]string{
		`// el.innerHTML = x; eval("1") in a comment is not code`,
		`/* document.write(x)`,
		`   still a comment: setTimeout("x") */`,
		`const u = "http://example.com/a"; const r = /['"]/g; el.innerHTML = u;`, // 4
		"const s = `${a ? `x` : \"y\"}`; el.outerHTML = s;",                      // 5
		`el.insertAdjacentHTML("beforeend", s);`,                                 // 6
		`document.write(s); document.writeln(s);`,                                // 7
		`eval(s);`,                            // 8
		`const f = new Function("return 1");`, // 9
		`setTimeout("alert(1)", 10);`,         // 10
		`setInterval(handler, 10);`,           // 11
		`frame.srcdoc = s;`,                   // 12
		`el.setAttribute(name, s);`,           // 13
		`el.setAttribute("onclick", s); el.setAttribute("HREF", s);`, // 14
		`el.onerror = s;`, // 15
		`img.src = s;`,    // 16
		`location.href = s; location.assign(s); window.open(s);`,                                               // 17
		`const bad = "JavaScript:alert(1)";`,                                                                   // 18
		`new DOMParser().parseFromString(s, "text/html"); document.createRange().createContextualFragment(s);`, // 19
		`const m = "<img src=x onerror=alert(1)>";`,                                                            // 20
		`h("iframe", { src: s }); document.createElement("script");`,                                           // 21
		`document.createElement(tag);`,                                                                         // 22
		`el.style.cssText = s;`,                                                                                // 23
		`Object.assign(el.style, s);`,                                                                          // 24
		`URL.createObjectURL(b);`,                                                                              // 25
		`import(s);`,                                                                                           // 26
		`window.addEventListener("message", f);`,                                                               // 27
		`new Worker(s);`,                                                                                       // 28
		`x = a / b; y = "/* not a comment */"; eval(y);`,                                                       // 29
	}, "\n")
	found := scanJS("synthetic.js", src)
	at := map[string][]int{}
	for _, f := range found {
		at[f.sink] = append(at[f.sink], f.line)
	}
	for _, s := range sinks {
		if len(at[s.name]) == 0 {
			t.Errorf("sink %q not found in the synthetic script", s.name)
		}
	}
	for _, f := range found {
		if f.line <= 3 {
			t.Errorf("a comment was scanned as code: %s", f)
		}
	}
	for sinkName, want := range map[string][]int{
		"markup property": {4, 5}, "eval": {8, 29}, "timer with a string": {10}, "timer with a named callback": {11},
		"setAttribute of a handler, URL or style": {14, 14}, "script URL": {18}, "location change": {17, 17, 17},
	} {
		got := at[sinkName]
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s found on lines %v, want %v", sinkName, got, want)
		}
	}

	// The allow-list check: an unlisted use, one use too many and a stale
	// allowance are each reported.
	fs := []finding{{"a.js", "eval", 1, "eval(x)"}, {"b.js", "blob URL", 1, "x"}, {"b.js", "blob URL", 2, "y"}}
	bad := check(fs, []allowance{{"b.js", "blob URL", 1, "reviewed"}, {"c.js", "srcdoc", 1, "stale"}})
	if len(bad) != 3 || !strings.Contains(strings.Join(bad, "\n"), "not allowed: a.js:1: eval") {
		t.Errorf("check reported %q, want the unlisted eval, the extra blob URL and the stale srcdoc", bad)
	}

	// The page: an inline script, an inline handler, a javascript: link.
	page := `<script>alert(1)</script><script type="module" src="/v2/assets/app.js"></script>` +
		`<body onload="x()"><a href="javascript:alert(1)">x</a><iframe srcdoc="x"></iframe>`
	names := map[string]bool{}
	for _, f := range scanHTML("index.html", page) {
		names[f.sink] = true
	}
	for _, s := range htmlSinks {
		if !names[s.name] {
			t.Errorf("page sink %q not found in the synthetic page", s.name)
		}
	}
	if fs := scanHTML("index.html", `<script type="module" src="/v2/assets/app.js"></script>`); len(fs) != 0 {
		t.Errorf("the console's own script tag was taken for a sink: %v", fs)
	}
}
