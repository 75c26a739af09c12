// Command image builds the manager's container image without a container
// daemon (`make image`): the static flyte-manager binary, CA certificates and
// a non-root user (65532), for linux/amd64 and linux/arm64, written as an OCI
// image layout and as tarballs that `docker load` and `podman load` read.
//
// The build is reproducible: the binary is built with -trimpath and no build
// id, every file in the layers has the same mtime (the commit's time by
// default) and owner, and the image's creation time is that time too, so two
// builds of one commit give one digest. docs/image.md describes the image.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// options are what one build needs; the flags set them.
type options struct {
	// root is the repository root (where go.mod and ./manager are).
	root string
	// out is the directory the layout and tarballs are written into.
	out string
	// platforms are os/arch pairs, e.g. linux/amd64.
	platforms []string
	// version, revision and source become the OCI labels and the binary's
	// version; version is also a tag besides latest.
	version, revision, source string
	// epoch is every file's mtime and the image's creation time.
	epoch time.Time
	// caFile is the CA bundle copied to /etc/ssl/certs/ca-certificates.crt.
	caFile string
	// goCmd runs the Go toolchain.
	goCmd string
	// dockerTars also writes one `docker load` tarball per platform.
	dockerTars bool
}

func main() {
	o := options{goCmd: "go"}
	var platforms string
	var epoch int64
	flag.StringVar(&o.root, "root", ".", "repository root")
	flag.StringVar(&o.out, "o", "dist/image", "output directory")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.StringVar(&o.version, "version", "dev", "the manager's version: a tag and the version label")
	flag.StringVar(&o.revision, "revision", "unknown", "the source revision (commit) label")
	flag.StringVar(&o.source, "source", "", "the source repository URL label")
	flag.Int64Var(&epoch, "epoch", defaultEpoch(), "mtime of every file and the creation time, in Unix seconds ($SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.caFile, "ca", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle to include")
	flag.BoolVar(&o.dockerTars, "docker-tars", true, "also write a docker-archive tarball per platform")
	flag.Parse()
	o.platforms = strings.Split(platforms, ",")
	o.epoch = time.Unix(epoch, 0).UTC()
	res, err := build(context.Background(), o, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("image %s: index %s\n", res.ref, res.digest)
}

// defaultEpoch is $SOURCE_DATE_EPOCH, or 0 when unset (the Makefile passes
// the commit's time).
func defaultEpoch() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return v
	}
	return 0
}
