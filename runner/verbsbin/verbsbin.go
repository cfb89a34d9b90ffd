// Package verbsbin finds an rdmaprobe binary with the verbs fabric, for
// the code that launches one (in a guest or beside this process): this
// binary when it was built with the verbs tag, otherwise one built from the
// source tree and cached by a hash of its sources.
package verbsbin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
)

// Path returns a binary with the verbs fabric: this one when it
// was built with it, otherwise one built (and cached) from the source
// tree this binary or the working directory belongs to. A test binary
// (go test -tags verbs) is never this one: started by name on another
// host, as a --vm-peer guest's launcher starts it, it would run its tests
// instead of the command.
func Path(ctx context.Context) (string, error) {
	if verbs.Supported() && !testing.Testing() {
		return os.Executable()
	}
	dir := ModuleDir()
	if dir == "" {
		return "", fmt.Errorf("this rdmaprobe has no verbs fabric and no source tree to build one from: build it with `make build` (needs libibverbs-dev)")
	}
	return EnsureBinary(ctx, dir, CacheDir())
}

// CacheDir is where Path keeps the binaries it builds.
func CacheDir() string {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "rdmaprobe")
}

// ModuleDir finds rdmaprobe's go.mod above the working directory or the
// executable; "" if neither is in the source tree.
func ModuleDir() string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, d := range starts {
		for {
			b, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && strings.Contains(string(b), "module github.com/rdmaprobe/rdmaprobe\n") {
				return d
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return ""
}
