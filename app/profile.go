package app

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/urfave/cli/v2"
)

// profileFlag writes a CPU profile of serve or clients (pprof format) for
// the profile-driven work; the probe commands set it per process with
// --profile DIR.
func profileFlag() cli.Flag {
	return &cli.StringFlag{Name: "cpuprofile", Hidden: true, Usage: "write a CPU profile of this process to `FILE`"}
}

// startProfile starts the CPU profile named by --cpuprofile, if any; the
// returned func stops it.
func startProfile(c *cli.Context) (func(), error) {
	path := c.String("cpuprofile")
	if path == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
