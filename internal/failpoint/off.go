//go:build !failpoints

package failpoint

// Hit does nothing in a normal build (see the package comment).
func Hit(string) {}

// Enabled reports whether this build kills at armed failpoints.
const Enabled = false
