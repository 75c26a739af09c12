// Package secretfiles delivers secrets to a process the local executor
// starts (a task's attempt, an app's replica): variables in its
// environment only (never the manager's, never a log: contract.Env shows
// names), files in <dir>/secrets (0700, files 0600), which
// FLYTE_SECRETS_DEFAULT_DIR names because a host process cannot be given
// its own /etc/flyte/secrets; directory and files belong to the user the
// process runs as, so no process of another user reads them. Remove takes
// them away once the process ended.
package secretfiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/runas"
)

// Dir is the secrets' directory under the process's directory.
const Dir = "secrets"

// Deliver writes the file secrets of secrets into dir/secrets, owned by
// user (who the process runs as), and returns env with every secret
// variable set.
func Deliver(dir string, env contract.Env, secrets []contract.Secret, user runas.User) (contract.Env, error) {
	if len(secrets) == 0 {
		return env, nil
	}
	sdir := filepath.Join(dir, Dir)
	env = env.With(contract.SecretEnv(secrets, sdir)...)
	var values []contract.KV
	for _, s := range secrets {
		if s.EnvVar != "" {
			values = append(values, contract.KV{Key: s.EnvVar, Value: string(s.Value)})
		}
		if s.File == "" {
			continue
		}
		path := filepath.Join(sdir, s.File)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("could not create the secrets directory: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("could not write secret %q: %w", s.Key, err)
		}
		_, werr := f.Write(s.Value)
		if cerr := f.Close(); werr != nil || cerr != nil {
			return nil, fmt.Errorf("could not write secret %q", s.Key)
		}
	}
	if user.Other() {
		err := filepath.WalkDir(sdir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := os.Lchown(path, int(user.UID), int(user.GID)); err != nil {
				return err
			}
			if d.IsDir() {
				// 0700 and no set-group-id bit (inherited from the work
				// directory, which gives new entries the attempts' group).
				return os.Chmod(path, 0o700)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("could not give the secrets to the process's user: %w", err)
		}
	}
	return env.With(values...), nil
}

// Remove deletes the secret files of dir.
func Remove(dir string) { _ = os.RemoveAll(filepath.Join(dir, Dir)) }
