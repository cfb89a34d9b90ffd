package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/verbs"
	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

func init() {
	verbsProvider = func() fabric.Provider {
		if verbs.Supported() {
			return verbs.New()
		}
		return nil
	}
	verbsBackend = newVerbsBackend
}

// verbsBinary returns a binary with the verbs fabric: this one when it was
// built with it, otherwise one built (and cached) from the source tree
// this binary or the working directory belongs to.
func verbsBinary(ctx context.Context) (string, error) {
	if verbs.Supported() {
		return os.Executable()
	}
	dir := moduleDir()
	if dir == "" {
		return "", fmt.Errorf("this rdmaprobe has no verbs fabric and no source tree to build one from: build it with `make build` (needs libibverbs-dev)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return verbs.EnsureBinary(ctx, dir, filepath.Join(cache, "rdmaprobe"))
}

// moduleDir finds rdmaprobe's go.mod above the working directory or the
// executable.
func moduleDir() string {
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

func newVerbsBackend(c *cli.Context, reason string) (*backend, error) {
	b := &backend{
		Backend: result.Backend{Name: "verbs", Reason: reason,
			Description: "verbs: RDMA device on this host"},
		childArgs: childFabricArgs(c, "verbs"),
	}
	b.open = func(ctx context.Context, cfg runner.Config, run *result.Run, dir string) (probe.Measure, func(), error) {
		exe, err := verbsBinary(ctx)
		if err != nil {
			return nil, nil, err
		}
		cfg.Exe = exe
		cfg.SampleDevice = c.String("device")
		if cfg.SampleDevice == "" {
			if ents, err := os.ReadDir("/sys/class/infiniband"); err == nil && len(ents) > 0 {
				cfg.SampleDevice = ents[0].Name()
			}
		}
		m, done, err := localOpen(ctx, cfg, run, dir)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, n, trial int) (result.Point, error) {
			pt, err := m(ctx, n, trial)
			if d := run.Environment.Device; d != nil {
				run.Backend.Description = fmt.Sprintf("verbs: %s port %d (%s) on Linux %s",
					d.Name, d.Port.Port, d.Port.LinkLayer, shortRelease(run.Environment.Kernel))
			}
			return pt, err
		}, done, nil
	}
	return b, nil
}
