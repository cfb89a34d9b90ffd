package app

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// limitFlags lower the server's own limits to reproduce an environment.
func limitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{Name: "nofile", Usage: "set the server's RLIMIT_NOFILE (open files) to this"},
		&cli.Uint64Flag{Name: "memlock", Usage: "set the server's RLIMIT_MEMLOCK to this many bytes"},
	}
}

// limitArgs passes the limit flags on to serve.
func limitArgs(c *cli.Context) []string {
	var args []string
	for _, f := range []string{"nofile", "memlock"} {
		if v := c.Uint64(f); v > 0 {
			args = append(args, "--"+f, fmt.Sprint(v))
		}
	}
	return args
}

// raiseNoFile lifts this process's open-file limit to the kernel's
// fs.nr_open when it is allowed to (root), so that a point is bounded by
// what it measures rather than by a login default such as 1024 or 20000.
// The limit in force is recorded with every point; --nofile lowers it.
func raiseNoFile() {
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

// applyLimits sets this process's limits from the flags.
func applyLimits(c *cli.Context) error {
	raiseNoFile()
	set := func(flag string, res int) error {
		v := c.Uint64(flag)
		if v == 0 {
			return nil
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("--%s %d: %w", flag, v, err)
		}
		return nil
	}
	if err := set("nofile", unix.RLIMIT_NOFILE); err != nil {
		return err
	}
	return set("memlock", unix.RLIMIT_MEMLOCK)
}
