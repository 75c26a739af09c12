package apps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"fmgr.dev/executor/contract"
)

// A replica's secrets: the app's own (AppEnvironment(secrets=...), in its
// spec's security context), resolved in its project and domain as a
// task's are, and its storage key, scoped to the app's data when the
// manager mints keys (Config.StorageKey). Both are delivered as an
// attempt's are (package secretfiles): variables in its environment only,
// files in <replica>/secrets of its user's alone, removed when it ends;
// never in a log or a report.

// appCredentialKey is the Key of the secret carrying the app's credential.
const appCredentialKey = "flyte-manager:app-credential"

// secretsTimeout bounds the lookup of an app's secrets (a variable for
// the tests).
var secretsTimeout = 10 * time.Second

// errTargetChanged: the app was changed or removed while its secrets were
// looked up; the loop goes on from what the app is now.
var errTargetChanged = errors.New("the app changed while a replica was starting")

// replicaSecrets returns what a replica of a must be given, or why it
// cannot start (naming secrets, never a value). r.mu is held, and let go
// while the secrets are read from the database, so that a slow database
// holds up neither the apps proxy nor the other apps; errTargetChanged
// when a changed meanwhile.
func (r *Runtime) replicaSecrets(a *appState, prefix string) ([]contract.Secret, error) {
	k, spec, revision := a.key, a.target.Spec, a.target.Revision
	var out []contract.Secret
	if r.cfg.StorageKey != nil {
		own, err := r.cfg.StorageKey(k, prefix)
		if err != nil {
			return nil, fmt.Errorf("could not make the replica's storage key: %w", err)
		}
		out = append(out, own...)
	}
	if r.cfg.Credential != nil {
		out = append(out, contract.Secret{Key: appCredentialKey, Value: []byte(r.cfg.Credential(k)), EnvVar: contract.EnvTaskToken})
	}
	reqs := spec.GetSecurityContext().GetSecrets()
	if len(reqs) == 0 {
		return out, nil
	}
	var want []contract.Secret
	var names []string
	for _, req := range reqs {
		s, err := contract.SecretDelivery(req)
		if err != nil {
			return nil, err
		}
		want = append(want, s)
		if !slices.Contains(names, s.Key) {
			names = append(names, s.Key)
		}
	}
	if r.cfg.Secrets == nil {
		return nil, fmt.Errorf("the app requests secrets (%s) but this manager has no secret service", strings.Join(names, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
	defer cancel()
	r.mu.Unlock()
	values, err := r.cfg.Secrets(ctx, k, names)
	r.mu.Lock()
	if a.removed || a.target.Revision != revision {
		return nil, errTargetChanged
	}
	if err != nil {
		r.cfg.Log.Warn("looking up an app's secrets", "app", k.String(), "err", err)
		return nil, fmt.Errorf("could not look up the app's secrets")
	}
	var missing []string
	for _, n := range names {
		if _, ok := values[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("secret %s not found in project %s, domain %s or org-wide; create it with `flyte create secret %s`",
			strings.Join(missing, ", "), k.Project, k.Domain, missing[0])
	}
	for i := range want {
		want[i].Value = values[want[i].Key]
		if want[i].EnvVar != "" && slices.Contains(want[i].Value, 0) {
			return nil, fmt.Errorf("secret %q holds a NUL byte, which an environment variable cannot carry; request it as a file", want[i].Key)
		}
	}
	// After the storage key, so that a secret of the app's under the same
	// name wins (as for tasks).
	return append(out, want...), nil
}
