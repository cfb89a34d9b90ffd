package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

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

// ConnectTimerSlack is the timer slack of the built-in server's and the
// load generators' threads while clients connect (slackenThreads).
const ConnectTimerSlack = 10 * time.Millisecond

// slackenThreads sets the timer slack of every thread of process pid
// (0: this one) to slack and returns what puts back the kernel's
// default. Threads started meanwhile inherit it from the thread that
// starts them, so the reset covers them.
//
// Why, while clients connect: in the TCG guest almost every system call
// of the server and the generators (verbs calls, TCP connects, loopback
// writes) outlasts a tick of the Go runtime's sysmon, which then keeps
// sleeping 20 µs at a time. Each sleep is a timer interrupt and two
// context switches under emulation: perf in the guest put the server's
// and the generator's sysmon at 4-8% of all the guest's CPU each during
// the connect window of 1000 clients. With 10 ms of slack the kernel
// coalesces those wakeups (0.4-0.7% each). Nothing timed while clients
// connect waits on a timer: phases and round trips are measured from
// completions, deadlines are a minute. The slack is gone before the
// traffic phase, whose open loop paces messages with timers.
//
// Another process's or thread's slack needs CAP_SYS_NICE (root, as in
// the guest); without it, threads keep theirs and nothing else changes.
func slackenThreads(pid int, slack time.Duration) (restore func()) {
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	set := func(v int64) {
		tids, _ := os.ReadDir("/proc/" + proc + "/task")
		for _, t := range tids {
			// /proc/TID/ (not /proc/PID/task/TID/) holds a thread's.
			os.WriteFile("/proc/"+t.Name()+"/timerslack_ns", []byte(strconv.FormatInt(v, 10)), 0) // best effort, see above
		}
	}
	set(slack.Nanoseconds())
	return func() { set(0) }
}
