package local

import (
	"fmgr.dev/executor/attempt"
	"fmgr.dev/executor/contract"
	"fmgr.dev/executor/local/runas"
	"fmgr.dev/executor/local/secretfiles"
)

// Secrets reach an attempt's process and nothing else (package
// secretfiles): in its environment, and as files in <attempt
// dir>/secrets of its user's alone. The directory goes when the attempt
// ends.

// deliverSecrets writes l's file secrets into the attempt directory dir,
// owned by user (who the attempt runs as), and returns the process's
// environment with every secret variable set.
func deliverSecrets(dir string, l *attempt.Launch, user runas.User) (contract.Env, error) {
	return secretfiles.Deliver(dir, l.Env, l.Secrets, user)
}

// removeSecrets deletes the secret files of the attempt directory dir.
func removeSecrets(dir string) { secretfiles.Remove(dir) }
