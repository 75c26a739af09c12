package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"fmgr.dev/internal/errs"
)

// Registry is the host part of every image name this manager gives out:
// an image built as a Python environment is not pullable, and its name
// says so.
const Registry = "flyte-manager.local/env"

// Layout of the store's directory:
//
//	envs/<key>/          the environment (a uv virtualenv)
//	envs/<key>/.fm-ready written by the build's last step; its mtime is the
//	                     environment's last use
//	envs/<key>/fm-env.json  its Manifest, written once it is ready
//	locks/<key>.lock     held (flock) by the build of key, and by the cache's
//	                     collection while it removes key
//	staging/<id>/        a build's own directory (install.go)
//	index/<hash>.json    an image name (name:tag, as the SDK asks for it) to
//	                     its fqin
const (
	envsDir      = "envs"
	locksDir     = "locks"
	indexDir     = "index"
	readyFile    = ".fm-ready"
	manifestFile = "fm-env.json"
)

// Manifest describes a built environment.
type Manifest struct {
	Key    string            `json:"key"`
	FQIN   string            `json:"fqin"`
	Name   string            `json:"name"`
	Python string            `json:"python"`
	SDK    string            `json:"sdk,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	Bytes  int64             `json:"bytes"`
	Built  time.Time         `json:"built"`
	// Rootfs marks a root filesystem image (rootfs.go), run in the
	// container runtime: the files are in rootfs/ of its directory.
	Rootfs bool `json:"rootfs,omitempty"`
}

// Store keeps the environments of one host.
type Store struct {
	dir      string
	maxBytes int64
	log      *slog.Logger

	mu       sync.Mutex
	inUse    map[string]int       // environments attempts run in now: never collected
	building map[string]*building // builds of this manager running now (Claim)
}

// NewStore returns the store in dir, collected down to maxBytes (0: no cap).
func NewStore(dir string, maxBytes int64, log *slog.Logger) *Store {
	return &Store{dir: dir, maxBytes: maxBytes, log: log, inUse: map[string]int{}, building: map[string]*building{}}
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// EnvDir is where key's environment is.
func (s *Store) EnvDir(key string) string { return filepath.Join(s.dir, envsDir, key) }

// LockFile is the lock of key's build.
func (s *Store) LockFile(key string) string { return filepath.Join(s.dir, locksDir, key+".lock") }

// Prepare creates the store's directories; the environments must be
// readable to the attempts (mode 0755 less the manager's umask), staging
// searchable by them (each build's directory there is its own).
func (s *Store) Prepare() error {
	for _, d := range []string{s.dir, filepath.Join(s.dir, envsDir), filepath.Join(s.dir, locksDir), filepath.Join(s.dir, indexDir), filepath.Join(s.dir, stagingDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("image environments: %w", err)
		}
	}
	// What builds of an earlier manager left (a restart does not go on
	// with a build: its attempt ends, and its run says so).
	left, _ := os.ReadDir(filepath.Join(s.dir, stagingDir))
	for _, e := range left {
		if err := removeTree(filepath.Join(s.dir, stagingDir, e.Name())); err != nil {
			s.log.Warn("removing a build's staging directory", "dir", e.Name(), "err", err)
		}
	}
	return nil
}

var repoChars = regexp.MustCompile(`[^a-z0-9._/-]+`)

// FQIN is the name of key's environment built for target (the SDK's
// name:tag, or registry/name:tag).
func FQIN(target, key string) string {
	repo := target
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	if i := strings.Index(repo, ":"); i >= 0 {
		repo = repo[:i]
	}
	repo = strings.Trim(repoChars.ReplaceAllString(strings.ToLower(repo), "-"), "-./")
	if repo == "" {
		repo = "image"
	}
	return Registry + "/" + repo + ":" + key
}

var keyPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// KeyOf returns the environment key an image name of this manager names
// (ok false for any other image).
func KeyOf(image string) (key string, ok bool) {
	rest, found := strings.CutPrefix(image, Registry+"/")
	if !found {
		return "", false
	}
	i := strings.LastIndex(rest, ":")
	if i < 0 || !keyPattern.MatchString(rest[i+1:]) {
		return "", false
	}
	return rest[i+1:], true
}

// Ready returns key's manifest if its environment is built.
func (s *Store) Ready(key string) (*Manifest, bool) {
	dir := s.EnvDir(key)
	if _, err := os.Stat(filepath.Join(dir, readyFile)); err != nil {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return nil, false
	}
	var m Manifest
	if json.Unmarshal(b, &m) != nil || m.Key != key {
		return nil, false
	}
	return &m, true
}

// Built records a finished build of key for target by run (installed,
// Install, or found built): the index entry GetImage answers from, and a
// first use. Then the cache is collected down to its cap (sparing key).
func (s *Store) Built(key, target string, run BuildRun) (*Manifest, error) {
	m, ok := s.Ready(key)
	if !ok {
		return nil, fmt.Errorf("the environment %s is not complete", key)
	}
	fqin := FQIN(target, key)
	if m.Rootfs {
		fqin = RootfsFQIN(target, key)
	}
	if err := writeJSON(s.indexPath(target), indexEntry{Name: target, FQIN: fqin, Key: key, Run: run}); err != nil {
		return nil, err
	}
	s.touch(key)
	m.FQIN, m.Name = fqin, target
	s.Collect(key)
	return m, nil
}

type indexEntry struct {
	Name string   `json:"name"`
	FQIN string   `json:"fqin"`
	Key  string   `json:"key"`
	Run  BuildRun `json:"run"`
}

// BuildRun names the run whose build made an image (the SDK links a
// task's image to it).
type BuildRun struct {
	Org     string `json:"org,omitempty"`
	Project string `json:"project"`
	Domain  string `json:"domain"`
	Name    string `json:"name"`
}

func (s *Store) indexPath(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(s.dir, indexDir, hex.EncodeToString(sum[:16])+".json")
}

// Lookup returns the fqin of the image the SDK calls name (name:tag,
// without a registry) if its environment is built on this host, and the
// run that built it: errs.ErrNotFound otherwise (never built, or collected
// since).
func (s *Store) Lookup(name string) (string, BuildRun, error) {
	b, err := os.ReadFile(s.indexPath(name))
	if err != nil {
		return "", BuildRun{}, errs.NotFoundf("image %s has not been built", name)
	}
	var e indexEntry
	if json.Unmarshal(b, &e) != nil || e.Name != name {
		return "", BuildRun{}, errs.NotFoundf("image %s has not been built", name)
	}
	if _, ok := s.Ready(e.Key); !ok {
		return "", BuildRun{}, errs.NotFoundf("image %s is no longer built (its environment was removed to keep the cache under its size cap)", name)
	}
	return e.FQIN, e.Run, nil
}

// Find is Lookup for GetImage (imagebuilder.Finder).
func (s *Store) Find(_ context.Context, name string) (string, BuildRun, error) { return s.Lookup(name) }

// Use marks key's environment in use by an attempt until release is
// called, and returns its manifest; errs.ErrNotFound if it is not built.
func (s *Store) Use(key string) (m *Manifest, release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.Ready(key)
	if !ok {
		return nil, nil, errs.NotFoundf("the image environment %s is not on this host", key)
	}
	s.inUse[key]++
	s.touch(key)
	var once sync.Once
	return m, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.inUse[key]--; s.inUse[key] <= 0 {
				delete(s.inUse, key)
			}
		})
	}, nil
}

// BinDir is the bin directory of key's environment.
func (s *Store) BinDir(key string) string { return filepath.Join(s.EnvDir(key), "bin") }

func (s *Store) touch(key string) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(s.EnvDir(key), readyFile), now, now)
}

// Collect removes the environments used longest ago until the rest fit
// the cap, sparing keep, the environments attempts run in, and any whose
// build holds its lock.
func (s *Store) Collect(keep string) {
	if s.maxBytes <= 0 {
		return
	}
	type env struct {
		key   string
		bytes int64
		used  time.Time
	}
	entries, err := os.ReadDir(filepath.Join(s.dir, envsDir))
	if err != nil {
		return
	}
	var envs []env
	var total int64
	for _, de := range entries {
		m, ok := s.Ready(de.Name())
		if !ok {
			continue
		}
		fi, err := os.Stat(filepath.Join(s.EnvDir(m.Key), readyFile))
		if err != nil {
			continue
		}
		envs = append(envs, env{key: m.Key, bytes: m.Bytes, used: fi.ModTime()})
		total += m.Bytes
	}
	sort.Slice(envs, func(i, j int) bool { return envs[i].used.Before(envs[j].used) })
	for _, e := range envs {
		if total <= s.maxBytes {
			return
		}
		if e.key == keep {
			continue
		}
		if s.remove(e.key) {
			total -= e.bytes
			s.log.Info("image environment removed: the cache is over its size cap", "key", e.key, "bytes", e.bytes,
				"lastUsed", e.used.UTC().Format(time.RFC3339))
		}
	}
}

// remove deletes key's environment unless it is in use or being built.
func (s *Store) remove(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inUse[key] > 0 {
		return false
	}
	f, err := os.OpenFile(s.LockFile(key), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	dir := s.EnvDir(key)
	// Not ready first, so that nothing starts in a half-removed one (the
	// directory is read-only: Install).
	_ = os.Chmod(dir, 0o750)
	if err := os.Remove(filepath.Join(dir, readyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err := removeTree(dir); err != nil {
		s.log.Warn("removing an image environment", "key", key, "err", err)
	}
	return true
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
