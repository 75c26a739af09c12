// Package loglink makes the log links an attempt reports
// (ActionAttempt.log_info): each has a name and a URI a client can open.
//
// A link is made in two steps. When the executor records an attempt's log,
// it renders each link from what is known then (the attempt's identity, on
// Kubernetes its Pod) and stores it; a link to the manager itself is stored
// as a rooted path ("/logs/..."), because the manager's address depends on
// who asks. When a client reads the attempt, Resolve puts the base URL that
// client used (or server.externalURL) in front of such a path, so the link
// works from wherever the client reached the manager.
//
// The manager's own log endpoint, Path, answers an attempt's log as plain
// text (dataproxy serves it, behind the server's host guard like every
// route).
package loglink

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"fmgr.dev/internal/ident"
)

// DefaultName names the link to the manager's own log endpoint, as the
// attempt's one log is named in its LogContext.
const DefaultName = "logs"

// Attempt identifies one attempt of an action.
type Attempt struct {
	Org, Project, Domain, Run, Action string
	// Number counts from 1, as ActionAttempt.attempt does.
	Number int32
}

// Pattern is the net/http route pattern of the manager's log endpoint; its
// wildcards are named as the Attempt fields.
const Pattern = "GET /logs/{org}/{project}/{domain}/{run}/{action}/{attempt}"

// Path is the manager's log endpoint of a, rooted.
func Path(a Attempt) string {
	org := a.Org
	if org == "" {
		org = ident.LocalOrg
	}
	parts := []string{org, a.Project, a.Domain, a.Run, a.Action, strconv.Itoa(int(a.Number))}
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/logs/" + strings.Join(parts, "/")
}

// FromPath reads the attempt from the wildcards of a request matched by
// Pattern (get is http.Request.PathValue). The identity's parts are checked
// by whoever looks the attempt up; the number must be positive here.
func FromPath(get func(string) string) (Attempt, error) {
	n, err := strconv.ParseInt(get("attempt"), 10, 32)
	if err != nil || n < 1 {
		return Attempt{}, fmt.Errorf("attempt %q: want a positive number (attempts count from 1)", get("attempt"))
	}
	return Attempt{Org: ident.Org(get("org")), Project: get("project"), Domain: get("domain"), Run: get("run"), Action: get("action"), Number: int32(n)}, nil
}

// Resolve is a stored link as a client reading attempt a through base (its
// base URL, "" outside a request) gets it: a rooted path becomes an absolute
// URL on base, and a link stored without a URI (as every attempt's was
// before links had addresses) becomes the manager's log endpoint of a.
// Other URIs are the reporter's and pass as they are.
func Resolve(base string, a Attempt, name, uri string) (string, string) {
	if uri == "" {
		uri = Path(a)
		if name == "" {
			name = DefaultName
		}
	}
	if strings.HasPrefix(uri, "/") && !strings.HasPrefix(uri, "//") {
		uri = strings.TrimRight(base, "/") + uri
	}
	return name, uri
}
