package secret

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"fmgr.dev/internal/config"
)

// Values are sealed with AES-256-GCM under the keyring's active key. The
// stored blob is nonce || ciphertext; the key's id is stored beside it, and
// the secret's scope and name are the additional data, so a blob copied to
// another row does not open.
//
// A keyring comes from secrets.key (one fixed key) or from a keyring file,
// one "<id> <base64 key>" per line: the first line's key seals new values,
// every line's key opens values. The manager re-reads the file when it
// changes (checked before every use), so `flyte-manager secrets
// rotate-key`, which rewrites it, takes effect without a restart.

// keyringHeader opens every keyring file written by the manager.
const keyringHeader = "# flyte-manager secrets keyring: \"<id> <base64 key>\" per line; the first seals new values, all open them.\n"

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Key is one AES-256 key and its id.
type Key struct {
	ID  string
	Raw []byte
}

// NewKey returns a fresh random key with a random id.
func NewKey() (Key, error) {
	raw := make([]byte, config.SecretKeySize)
	id := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return Key{}, fmt.Errorf("generating a secrets key: %w", err)
	}
	if _, err := rand.Read(id); err != nil {
		return Key{}, fmt.Errorf("generating a secrets key: %w", err)
	}
	return Key{ID: hex.EncodeToString(id), Raw: raw}, nil
}

// fixedKeyID names the key given as secrets.key: derived from the key, so
// every replica configured with it agrees, without revealing it.
func fixedKeyID(raw []byte) string {
	sum := sha256.Sum256(append([]byte("flyte-manager secrets key id\x00"), raw...))
	return "cfg-" + hex.EncodeToString(sum[:8])
}

// Keyring seals and opens secret values.
type Keyring struct {
	path string // "" when the keyring is the fixed secrets.key
	// generated says OpenKeyring created the keyring file.
	generated bool

	mu     sync.Mutex
	stamp  fileStamp
	active string
	aeads  map[string]cipher.AEAD
}

// fileStamp tells a rewritten keyring file from the one last read.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// OpenKeyring returns the keyring cfg names. With secrets.keyFile at its
// default (<home>/secrets.keyring) a missing file is generated with a fresh
// key (mode 0600); a keyring file named explicitly must exist, so that a
// typo cannot make every stored value unreadable.
func OpenKeyring(cfg config.Secrets, home string) (*Keyring, error) {
	if cfg.Key != "" {
		raw, err := config.ParseSecretKey(cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("secrets.key %w", err)
		}
		k := &Keyring{}
		if err := k.set([]Key{{ID: fixedKeyID(raw), Raw: raw}}); err != nil {
			return nil, err
		}
		return k, nil
	}
	path := cfg.KeyFile
	if path == "" {
		path = filepath.Join(home, config.SecretsKeyringFile)
	}
	created := false
	isDefault := filepath.Clean(path) == filepath.Join(home, config.SecretsKeyringFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && isDefault {
		if created, err = createKeyringFile(path); err != nil {
			return nil, err
		}
	}
	k := &Keyring{path: path, generated: created}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// createKeyringFile writes a keyring of one fresh key, unless another
// process created the file first (created is false then).
func createKeyringFile(path string) (created bool, err error) {
	key, err := NewKey()
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("secrets keyring: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("creating the secrets keyring: %w", err)
	}
	_, werr := f.Write(formatKeyring([]Key{key}))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(path)
		return false, fmt.Errorf("writing the secrets keyring: %w", err)
	}
	return true, nil
}

// Path is the keyring file ("" for a fixed secrets.key).
func (k *Keyring) Path() string { return k.path }

// Generated says the keyring file was created by this OpenKeyring.
func (k *Keyring) Generated() bool { return k.generated }

// ActiveID is the id of the key that seals new values.
func (k *Keyring) ActiveID() (string, error) {
	if err := k.refresh(); err != nil {
		return "", err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.active, nil
}

// Has says whether the keyring (as on disk now) holds key id.
func (k *Keyring) Has(id string) (bool, error) {
	if err := k.refresh(); err != nil {
		return false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.aeads[id]
	return ok, nil
}

// Seal encrypts value for the secret ad names, under the active key.
func (k *Keyring) Seal(ad, value []byte) (keyID string, blob []byte, err error) {
	if err := k.refresh(); err != nil {
		return "", nil, err
	}
	k.mu.Lock()
	id, aead := k.active, k.aeads[k.active]
	k.mu.Unlock()
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("sealing a secret: %w", err)
	}
	return id, aead.Seal(nonce, nonce, value, ad), nil
}

// ErrUnknownKey: a value is sealed under a key the keyring does not hold.
var ErrUnknownKey = errors.New("sealed under a key the keyring does not hold")

// Open decrypts blob, sealed under key id for the secret ad names.
func (k *Keyring) Open(id string, ad, blob []byte) ([]byte, error) {
	if err := k.refresh(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	aead := k.aeads[id]
	k.mu.Unlock()
	if aead == nil {
		return nil, fmt.Errorf("key %q: %w (give every manager the same keyring)", id, ErrUnknownKey)
	}
	if len(blob) < aead.NonceSize() {
		return nil, errors.New("a stored secret value is truncated")
	}
	out, err := aead.Open(nil, blob[:aead.NonceSize()], blob[aead.NonceSize():], ad)
	if err != nil {
		return nil, fmt.Errorf("a stored secret value does not open under key %q (tampered with, or moved from another secret)", id)
	}
	return out, nil
}

// refresh re-reads the keyring file when it changed since it was read.
func (k *Keyring) refresh() error {
	if k.path == "" {
		return nil
	}
	st, err := stampOf(k.path)
	if err != nil {
		return fmt.Errorf("secrets keyring: %w", err)
	}
	k.mu.Lock()
	same := st == k.stamp
	k.mu.Unlock()
	if same {
		return nil
	}
	return k.reload()
}

func (k *Keyring) reload() error {
	st, err := stampOf(k.path)
	if err != nil {
		return fmt.Errorf("secrets keyring: %w", err)
	}
	keys, err := ReadKeyringFile(k.path)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.setLocked(keys); err != nil {
		return err
	}
	k.stamp = st
	return nil
}

func (k *Keyring) set(keys []Key) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.setLocked(keys)
}

func (k *Keyring) setLocked(keys []Key) error {
	if len(keys) == 0 {
		return errors.New("secrets keyring holds no key")
	}
	aeads := make(map[string]cipher.AEAD, len(keys))
	for _, key := range keys {
		block, err := aes.NewCipher(key.Raw)
		if err != nil {
			return fmt.Errorf("secrets key %q: %w", key.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return fmt.Errorf("secrets key %q: %w", key.ID, err)
		}
		aeads[key.ID] = aead
	}
	k.active, k.aeads = keys[0].ID, aeads
	return nil
}

func stampOf(path string) (fileStamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: info.ModTime(), size: info.Size(), ino: inode(info)}, nil
}

func inode(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// ReadKeyringFile parses a keyring file. Its errors name lines, never keys.
func ReadKeyringFile(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets keyring: %w", err)
	}
	var keys []Key
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		id, enc, ok := strings.Cut(text, " ")
		if !ok || !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("secrets keyring %s line %d: want \"<id> <base64 key>\" with an id of letters, digits, '-' and '_'", path, line)
		}
		raw, err := config.ParseSecretKey(enc)
		if err != nil {
			return nil, fmt.Errorf("secrets keyring %s line %d: the key %v", path, line, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("secrets keyring %s line %d: key id %q appears twice", path, line, id)
		}
		seen[id] = true
		keys = append(keys, Key{ID: id, Raw: raw})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("secrets keyring %s holds no key", path)
	}
	return keys, nil
}

// WriteKeyringFile replaces the keyring file at path with keys (the first
// one active) atomically: a manager reading it sees the old file or the new
// one, never a part.
func WriteKeyringFile(path string, keys []Key) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("secrets keyring: %w", err)
	}
	_, werr := tmp.Write(formatKeyring(keys))
	cherr := tmp.Chmod(0o600)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, cherr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing the secrets keyring: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing the secrets keyring: %w", err)
	}
	return nil
}

func formatKeyring(keys []Key) []byte {
	var b bytes.Buffer
	b.WriteString(keyringHeader)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s\n", k.ID, base64.StdEncoding.EncodeToString(k.Raw))
	}
	return b.Bytes()
}
