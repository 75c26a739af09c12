package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/runas"
)

// Secrets reach an attempt's process and nothing else: variables in its
// environment only (never the manager's, never a log: contract.Env shows
// names), files in <attempt dir>/secrets (0700, files 0600), which
// FLYTE_SECRETS_DEFAULT_DIR names because a host process cannot be given
// its own /etc/flyte/secrets; directory and files belong to the attempt's
// user, so no attempt of another user reads them. The directory goes when
// the attempt ends.
const secretsDir = "secrets"

// deliverSecrets writes l's file secrets into the attempt directory dir,
// owned by user (who the attempt runs as), and returns the process's
// environment with every secret variable set.
func deliverSecrets(dir string, l *attempt.Launch, user runas.User) (contract.Env, error) {
	if len(l.Secrets) == 0 {
		return l.Env, nil
	}
	sdir := filepath.Join(dir, secretsDir)
	env := l.Env.With(contract.SecretEnv(l.Secrets, sdir)...)
	var values []contract.KV
	for _, s := range l.Secrets {
		if s.EnvVar != "" {
			values = append(values, contract.KV{Key: s.EnvVar, Value: string(s.Value)})
		}
		if s.File == "" {
			continue
		}
		path := filepath.Join(sdir, s.File)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("could not create the attempt's secrets directory: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("could not write secret %q for the attempt: %w", s.Key, err)
		}
		_, werr := f.Write(s.Value)
		if cerr := f.Close(); werr != nil || cerr != nil {
			return nil, fmt.Errorf("could not write secret %q for the attempt", s.Key)
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
			return nil, fmt.Errorf("could not give the attempt's secrets to its user: %w", err)
		}
	}
	return env.With(values...), nil
}

// removeSecrets deletes the secret files of the attempt directory dir.
func removeSecrets(dir string) { _ = os.RemoveAll(filepath.Join(dir, secretsDir)) }
