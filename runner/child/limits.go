package child

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RaiseNoFile lifts this process's open-file limit to the kernel's
// fs.nr_open when it is allowed to (root), so that a point is bounded by
// what it measures rather than by a login default such as 1024 or 20000.
// The limit in force is recorded with every point; --nofile lowers it.
func RaiseNoFile() {
	data, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return
	}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Max < n {
		unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}) // best effort: unprivileged keeps its limit
	} else if rl.Cur < rl.Max {
		unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: rl.Max, Max: rl.Max})
	}
}

// setLimits raises the open-file limit, then sets the server's own
// limits to reproduce an environment (0 leaves one as it is).
func setLimits(nofile, memlock uint64) error {
	RaiseNoFile()
	set := func(flag string, v uint64, res int) error {
		if v == 0 {
			return nil
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("--%s %d: %w", flag, v, err)
		}
		return nil
	}
	if err := set("nofile", nofile, unix.RLIMIT_NOFILE); err != nil {
		return err
	}
	return set("memlock", memlock, unix.RLIMIT_MEMLOCK)
}

// startProfile starts a CPU profile into path, if set; the returned func
// stops it.
func startProfile(path string) (func(), error) {
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
