package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Confinement of an attempt that runs as another user (Spec.User): the
// paths it needs (the Python environment and the interpreter it links to,
// the work and blob directories) may lie under directories only the
// manager may enter (a home of mode 0700, /root where pyenv keeps its
// Pythons). Such a process gets a mount namespace of its own in which
// each of those directories is an empty tmpfs (mode 0755), with the paths
// it needs bound back at their own places: everything else in them (the
// manager's database, keys, other users' files) is not there at all. The
// paths bound back keep their own permissions; the work and blob
// directories let the attempts' group through (the driver sees to it).
// The namespace is made on the forking thread for a plain start (the
// child inherits it; the thread is discarded afterwards) and by the spare
// for a warm one (warm_server.py applies the same plan).

// confinePlan is what the namespace hides and binds back.
type confinePlan struct {
	Hide []string `json:"hide"` // outermost first
	Bind []string `json:"bind"`
}

func (p confinePlan) empty() bool { return len(p.Hide) == 0 }

// planConfinement returns the plan for attempts that must reach need.
// A needed path under a directory that others may not search is bound
// back in a tmpfs over the outermost such directory.
func planConfinement(need []string) confinePlan {
	var plan confinePlan
	for _, p := range need {
		if p == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		hide := outermostClosed(real)
		if hide == "" {
			continue
		}
		if !slices.Contains(plan.Hide, hide) {
			plan.Hide = append(plan.Hide, hide)
		}
		if !slices.Contains(plan.Bind, real) {
			plan.Bind = append(plan.Bind, real)
		}
	}
	// Outer directories first, so that a tmpfs never covers another's
	// binds; one nested in another is covered by the outer one already.
	slices.SortFunc(plan.Hide, func(a, b string) int { return len(a) - len(b) })
	var hide []string
	for _, h := range plan.Hide {
		if !slices.ContainsFunc(hide, func(o string) bool { return strings.HasPrefix(h, o+"/") }) {
			hide = append(hide, h)
		}
	}
	plan.Hide = hide
	return plan
}

// outermostClosed is the outermost strict ancestor of path (below /) that
// others may not search, "" if there is none.
func outermostClosed(path string) string {
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(path), "/"), "/")
	cur := ""
	for _, part := range parts[:len(parts)-1] {
		cur += "/" + part
		fi, err := os.Stat(cur)
		if err != nil {
			return ""
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return cur
		}
	}
	return ""
}

// PythonPaths is what an attempt needs to run the Python environment
// whose bin directory is binDir: the environment itself and the prefix of
// the interpreter it links to (a venv's python is a link into the Python
// it was made from).
func PythonPaths(binDir string) []string {
	if binDir == "" {
		return nil
	}
	paths := []string{filepath.Dir(binDir)}
	for _, name := range []string{"python3", "python"} {
		if real, err := filepath.EvalSymlinks(filepath.Join(binDir, name)); err == nil {
			paths = append(paths, filepath.Dir(filepath.Dir(real)))
			break
		}
	}
	return paths
}

const (
	msRec     = syscall.MS_REC
	msPrivate = syscall.MS_PRIVATE
	oPath     = 0x200000 // O_PATH
)

// attemptUmask is the umask of an attempt of another user: what it writes
// is its own and its group's to read (a parent task writes its children's
// inputs, which they read as other users of the group), nobody else's.
const attemptUmask = 0o027

// enterConfinement makes the calling OS thread (locked, never unlocked)
// enter a mount namespace of its own laid out by plan (none for an empty
// plan), with attemptUmask for what the process it forks creates.
func enterConfinement(plan confinePlan) error {
	if plan.empty() {
		// Only the umask, on this thread alone.
		if err := syscall.Unshare(syscall.CLONE_FS); err != nil {
			return fmt.Errorf("process: umask: %w", err)
		}
		syscall.Umask(attemptUmask)
		return nil
	}
	if err := syscall.Unshare(syscall.CLONE_NEWNS | syscall.CLONE_FS); err != nil {
		return fmt.Errorf("process: mount namespace: %w", err)
	}
	// The mount points below are made 0755 whatever the manager's umask;
	// the process forked then creates its files with 077.
	syscall.Umask(0)
	defer syscall.Umask(attemptUmask)
	if err := syscall.Mount("none", "/", "", msRec|msPrivate, ""); err != nil {
		return fmt.Errorf("process: mount namespace: private: %w", err)
	}
	fds := make([]int, len(plan.Bind))
	for i, b := range plan.Bind {
		fd, err := syscall.Open(b, oPath|syscall.O_CLOEXEC|syscall.O_DIRECTORY, 0)
		if err != nil {
			for _, f := range fds[:i] {
				syscall.Close(f)
			}
			return fmt.Errorf("process: mount namespace: %s: %w", b, err)
		}
		fds[i] = fd
	}
	defer func() {
		for _, f := range fds {
			syscall.Close(f)
		}
	}()
	var errs []error
	for _, h := range plan.Hide {
		if err := syscall.Mount("tmpfs", h, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=64k"); err != nil {
			errs = append(errs, fmt.Errorf("hide %s: %w", h, err))
		}
	}
	for i, b := range plan.Bind {
		if err := os.MkdirAll(b, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := syscall.Mount(fmt.Sprintf("/proc/self/fd/%d", fds[i]), b, "", syscall.MS_BIND|msRec, ""); err != nil {
			errs = append(errs, fmt.Errorf("bind %s: %w", b, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("process: mount namespace: %w", err)
	}
	return nil
}
