package blob

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// PruneDirs removes the empty directories a file store keeps under prefix
// (a key prefix naming a directory, e.g. a run's base) once its objects
// were deleted, deepest first, the directory of prefix included. Other
// stores have no directories: nothing to do. A directory that still holds
// something stays.
func (s *Store) PruneDirs(prefix string) error {
	if s.kind != KindFile {
		return nil
	}
	prefix = strings.Trim(prefix, "/")
	if err := ValidatePrefix(prefix); err != nil || prefix == "" {
		return err
	}
	top := s.filePath(prefix)
	var dirs []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Reverse(dirs) // children after their parents in walk order
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(err) {
			return err
		}
	}
	return nil
}

func isNotEmpty(err error) bool {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return errors.Is(pe.Err, syscall.ENOTEMPTY) || errors.Is(pe.Err, syscall.EEXIST)
	}
	return false
}
