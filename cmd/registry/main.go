// Command registry runs an OCI registry on this machine in the foreground
// (`make registry`), for `make image` to push to and a local node's
// containerd to pull from.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/modelserver-dev/modelserver-operator/internal/ociimage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:5000", "host:port to serve on; the host must be loopback or in 198.18.0.0/15")
	dir := flag.String("dir", "", "directory of the blobs (default $XDG_CACHE_HOME/modelserver-operator/registry, or ~/.cache/...)")
	quiet := flag.Bool("quiet", false, "do not log each request")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	if *dir == "" {
		// os.UserCacheDir is $XDG_CACHE_HOME, else ~/.cache, on Linux.
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no --dir, and no cache directory to default to: %w", err)
		}
		*dir = filepath.Join(cache, "modelserver-operator", "registry")
	}

	var opts []ociimage.RegistryOption
	if !*quiet {
		opts = append(opts, ociimage.RegistryRequestLog(os.Stderr))
	}
	reg, err := ociimage.StartRegistry(*addr, *dir, opts...)
	if err != nil {
		return err
	}
	// A clean stop returns Close's error below; this is for the other ways out.
	defer func() { _ = reg.Close() }()
	fmt.Printf("registry on %s, blobs in %s (manifests and tags are in memory: push again after a restart)\n", reg.Addr(), *dir)
	fmt.Printf("push with: go run ./cmd/image --push %s/modelserver-operator:VERSION\n", reg.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		fmt.Println("stopping the registry")
		return reg.Close()
	case <-reg.Done():
		return fmt.Errorf("the registry stopped serving: %w", reg.Err())
	}
}
