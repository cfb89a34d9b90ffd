package app

import (
	"fmt"

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

// applyLimits sets this process's limits from the flags.
func applyLimits(c *cli.Context) error {
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
