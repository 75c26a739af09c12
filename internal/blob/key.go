package blob

import (
	"path"
	"strings"
	"unicode/utf8"

	"fmgr.dev/internal/errs"
)

const (
	// MaxKeyBytes bounds a whole key (S3's limit).
	MaxKeyBytes = 1024
	// MaxSegmentBytes bounds one "/"-separated part of a key (the usual
	// file-name limit of local filesystems).
	MaxSegmentBytes = 255
)

// ValidateKey reports whether key may name an object in any store: a
// relative, clean, "/"-separated path of at most MaxKeyBytes bytes, valid
// UTF-8, without "." or ".." segments, segments ending in '.', backslashes,
// control characters (NUL included) or the "__0x" sequence the file driver
// reserves for its own escaping. A bad key is an errs.ErrInvalid whose text says what is
// wrong. Every Store method and the signed-URL handler use it, so the rules
// live here and nowhere else.
func ValidateKey(key string) error {
	return ValidatePath("key", key)
}

// ValidatePrefix is ValidateKey for a List prefix: "" (everything) and a
// trailing "/" are allowed.
func ValidatePrefix(prefix string) error {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" && prefix != "" {
		return errs.Invalidf("prefix %q must not start with '/'", prefix)
	}
	if p == "" {
		return nil
	}
	return ValidatePath("prefix", p)
}

// ValidateName reports whether name can be a single key segment, such as an
// uploaded file's name: a non-empty ValidateKey without "/". what names the
// field in the message ("filename", "project", ...).
func ValidateName(what, name string) error {
	if name == "" {
		return errs.Invalidf("%s is required", what)
	}
	if strings.Contains(name, "/") {
		return errs.Invalidf("%s %q must be a plain name without '/'", what, name)
	}
	return ValidatePath(what, name)
}

// ValidatePath applies the ValidateKey rules to a part of a key supplied
// by a caller, naming it what ("filename_root", ...) in the message.
func ValidatePath(what, key string) error {
	switch {
	case key == "":
		return errs.Invalidf("%s is empty", what)
	case len(key) > MaxKeyBytes:
		return errs.Invalidf("%s is %d bytes long; the limit is %d", what, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return errs.Invalidf("%s %q is not valid UTF-8", what, key)
	case strings.HasPrefix(key, "/"):
		return errs.Invalidf("%s %q must be relative (no leading '/')", what, key)
	case strings.ContainsRune(key, '\\'):
		return errs.Invalidf("%s %q must not contain '\\'", what, key)
	case strings.Contains(key, "__0x"):
		return errs.Invalidf("%s %q must not contain the reserved sequence \"__0x\"", what, key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return errs.Invalidf("%s %q must not contain control characters", what, key)
		}
	}
	for _, seg := range strings.Split(key, "/") {
		switch {
		case seg == "":
			return errs.Invalidf("%s %q must not contain empty segments ('//' or a trailing '/')", what, key)
		case seg == "." || seg == "..":
			return errs.Invalidf("%s %q must not contain '.' or '..' segments", what, key)
		case strings.HasSuffix(seg, "."):
			// A key is also a native path handed to tasks (Store.URI), and
			// such a segment does not survive as one: the file driver
			// escapes the '/' after "x.." so the object lands elsewhere
			// than the path, and Windows drops trailing dots. Leading dots
			// ("..x", ".env") are ordinary names everywhere.
			return errs.Invalidf("%s %q has a segment ending in '.' (%q), which is not a portable file name", what, key, seg)
		case len(seg) > MaxSegmentBytes:
			return errs.Invalidf("%s %q has a segment longer than %d bytes", what, key, MaxSegmentBytes)
		}
	}
	// Belt and braces: whatever passed the checks above is already clean.
	if path.Clean(key) != key {
		return errs.Invalidf("%s %q is not a clean path", what, key)
	}
	return nil
}
