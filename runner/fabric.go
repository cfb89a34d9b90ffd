package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
)

// HasVerbs reports whether this binary has the libibverbs fabric.
func HasVerbs() bool { return verbs.Supported() }

// HasRDMADevice reports whether the host kernel exposes an RDMA device.
func HasRDMADevice() (bool, string) {
	ents, err := os.ReadDir("/sys/class/infiniband")
	if err != nil || len(ents) == 0 {
		return false, "no RDMA device in /sys/class/infiniband"
	}
	return true, "RDMA device " + ents[0].Name() + " on this host"
}

// firstRDMADevice names the host's first RDMA device, "" if none.
func firstRDMADevice() string {
	if ents, err := os.ReadDir("/sys/class/infiniband"); err == nil && len(ents) > 0 {
		return ents[0].Name()
	}
	return ""
}

// VerbsBinary returns a binary with the verbs fabric: this one when it
// was built with it, otherwise one built (and cached) from the source
// tree this binary or the working directory belongs to.
func VerbsBinary(ctx context.Context) (string, error) {
	if verbs.Supported() {
		return os.Executable()
	}
	dir := ModuleDir()
	if dir == "" {
		return "", fmt.Errorf("this rdmaprobe has no verbs fabric and no source tree to build one from: build it with `make build` (needs libibverbs-dev)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return verbs.EnsureBinary(ctx, dir, filepath.Join(cache, "rdmaprobe"))
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
