package attempt

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"fmgr.dev/executor/contract"
	"fmgr.dev/gen/go/flyteidl2/core"
	"fmgr.dev/internal/store"
)

// CodeSecretNotFound: a secret the task requests does not exist, or cannot
// be delivered as requested. The action fails at once, without retries: no
// attempt could get it.
const CodeSecretNotFound = "SecretNotFound"

// secrets resolves the secrets a task requests through the SecretHook.
// failed, when set, is why the attempt can never get them (a missing
// secret, a request that cannot be delivered); it names secrets, never a
// value. err is the platform's.
func (c *Core) secrets(ctx context.Context, a *store.Action, reqs []*core.Secret) (out []contract.Secret, failed string, err error) {
	if len(reqs) == 0 {
		return nil, "", nil
	}
	var names []string
	for _, r := range reqs {
		s, err := contract.SecretDelivery(r)
		if err != nil {
			return nil, err.Error(), nil
		}
		out = append(out, s)
		if !slices.Contains(names, s.Key) {
			names = append(names, s.Key)
		}
	}
	if c.opts.Secrets == nil {
		return nil, fmt.Sprintf("the task requests secrets (%s) but this executor has no secret service", quoteAll(names)), nil
	}
	values, err := c.opts.Secrets.Values(ctx, a, names)
	if err != nil {
		return nil, "", err
	}
	var missing []string
	for _, n := range names {
		if _, ok := values[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, missingMessage(a, missing), nil
	}
	for i := range out {
		out[i].Value = values[out[i].Key]
		if out[i].EnvVar != "" && slices.Contains(out[i].Value, 0) {
			return nil, fmt.Sprintf("secret %q holds a NUL byte, which an environment variable cannot carry; request it as a file (flyte.Secret(key=%q, mount=%q))",
				out[i].Key, out[i].Key, contract.SecretsMountPath), nil
		}
	}
	return out, "", nil
}

func missingMessage(a *store.Action, missing []string) string {
	what := fmt.Sprintf("secret %s was", quoteAll(missing))
	if len(missing) > 1 {
		what = fmt.Sprintf("secrets %s were", quoteAll(missing))
	}
	return fmt.Sprintf("%s not found in project %s, domain %s or org-wide; create it with `flyte create secret %s`",
		what, a.Project, a.Domain, missing[0])
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
