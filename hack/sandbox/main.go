// Command sandbox builds the sandbox image (make sandbox-image): a Debian
// root filesystem (mmdebstrap) with Python and the pinned flyte SDK in a venv,
// the static manager, and `flyte-manager sandbox` as the entrypoint, written
// under dist/sandbox as an OCI layout and archives (docs/sandbox.md). The
// wheels, the root filesystem and its compressed layer are cached, so a
// rebuild of the same inputs only recompiles the manager. It builds for the
// host's architecture, with the host's pip downloading wheels for Debian's
// Python (bookworm's 3.11 here).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"
)

// options are the build's inputs.
type options struct {
	root, out, cache string
	sdkVersion       string // flyte==sdkVersion from PyPI
	uvVersion        string // uv==uvVersion beside it ("" for none): builds images' environments
	suite, mirror    string // mmdebstrap's suite and mirror ("" for its default)
	pip              string // the host's pip, to download wheels
	version          string
	revision         string
	epoch            time.Time
	goCmd            string
}

func main() {
	o := options{goCmd: "go"}
	var epoch int64
	flag.StringVar(&o.root, "root", ".", "repository root")
	flag.StringVar(&o.out, "o", "dist/sandbox", "output directory")
	flag.StringVar(&o.cache, "cache", ".cache/sandbox", "cache directory (wheels, root filesystems)")
	flag.StringVar(&o.sdkVersion, "sdk", "", "the flyte SDK version to install (required)")
	flag.StringVar(&o.uvVersion, "uv", "", "the uv version to install beside the SDK (builds images' environments; empty: none)")
	flag.StringVar(&o.suite, "suite", "bookworm", "Debian suite")
	flag.StringVar(&o.mirror, "mirror", "", "Debian mirror (default: mmdebstrap's)")
	flag.StringVar(&o.pip, "pip", ".venv/bin/pip", "pip used to download the wheels")
	flag.StringVar(&o.version, "version", "dev", "the manager's version: a tag and the version label")
	flag.StringVar(&o.revision, "revision", "unknown", "the source revision label")
	flag.Int64Var(&epoch, "epoch", 0, "creation time and the manager layer's mtimes, in Unix seconds")
	flag.Parse()
	if v, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil && epoch == 0 {
		epoch = v
	}
	o.epoch = time.Unix(epoch, 0).UTC()
	if o.sdkVersion == "" {
		fmt.Fprintln(os.Stderr, "sandbox: -sdk VERSION is required")
		os.Exit(2)
	}
	res, err := build(context.Background(), o, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("sandbox image %s: %s, %.1f MB compressed\n", res.ref, res.digest, float64(res.size)/1e6)
}
