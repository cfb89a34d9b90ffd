// Package testhosts gives tests real remote hosts on this machine, made
// and removed by the project's own scripts: client hosts as network
// namespaces each running its own sshd (scripts/testhosts.sh) and a
// one-node Slurm cluster with munge (scripts/testslurm.sh). Each script
// runs as a child of the test binary for as long as the test needs it;
// the test's clean-up closes its stdin, and it stops every process it
// started and removes what it made.
//
// A test that cannot have them (not root, tools not installed) is
// skipped with the reason; scripts/setup.sh installs the tools, and CI
// runs as root, so CI runs these tests.
package testhosts

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
)

// scriptsDir is the repository's scripts folder, found from the test's
// working directory (its package's) so tests in any package can use it;
// not from this source file's path, which make's -trimpath shortens to the
// module path.
func scriptsDir() string {
	return filepath.Join(verbsbin.ModuleDir(), "scripts")
}

// need skips t (fails it under make test: internal/parts) unless it runs
// as root with every tool in tools.
func need(t testing.TB, what string, tools ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		parts.Missing(t, "%s: Linux only", what)
	}
	if os.Geteuid() != 0 {
		parts.Missing(t, "%s: needs root (network namespaces, daemons)", what)
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			parts.Missing(t, "%s: %s not installed (scripts/setup.sh installs it)", what, tool)
		}
	}
}

// script is one running scripts/*.sh `run`: it holds what it made until
// its stdin closes.
type script struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	done   chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startScript runs scripts/<name> run args... and returns once it printed
// "ready <env file>", with that file's path. Clean-up ends it and checks
// that it exited cleanly.
func startScript(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	env, s, err := runScript(timeout, name, args...)
	held(t, name, s, err)
	return env
}

// held has t's clean-up stop the script s (if it started) and fails t
// with err.
func held(t testing.TB, name string, s *script, err error) {
	t.Helper()
	if s != nil {
		t.Cleanup(func() {
			if err := s.stop(name); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// runScript starts scripts/<name> run args... and returns, once it printed
// "ready <env file>", that file's path and the script, which holds what
// it made until stop. A script that started and then failed is returned
// with the error, to be stopped all the same.
func runScript(timeout time.Duration, name string, args ...string) (string, *script, error) {
	path := filepath.Join(scriptsDir(), name)
	cmd := exec.Command(path, append([]string{"run"}, args...)...)
	// If the test binary dies, the script still tears everything down:
	// its TERM trap does.
	cmd.SysProcAttr = termOnParentDeath()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	s := &script{cmd: cmd, stdin: stdin, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("%s: %v", name, err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if env, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- env
			}
		}
		close(ready)
		cmd.Wait()
		close(s.done)
	}()
	select {
	case env, ok := <-ready:
		if !ok {
			<-s.done
			return "", s, fmt.Errorf("%s failed: %v\n%s", name, cmd.ProcessState, s.stderr)
		}
		return env, s, nil
	case <-time.After(timeout):
		return "", s, fmt.Errorf("%s not ready after %v\n%s", name, timeout, s.stderr)
	}
}

// stop closes the script's stdin, which ends it; a script that does not
// finish its teardown in a minute is killed and reported.
func (s *script) stop(name string) error {
	s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s did not tear down within a minute; killed\n%s", name, s.stderr)
	}
	if !s.cmd.ProcessState.Success() {
		return fmt.Errorf("%s teardown: %v\n%s", name, s.cmd.ProcessState, s.stderr)
	}
	return nil
}

// readEnv parses the scripts' KEY=VALUE files (values optionally quoted).
func readEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		env[k] = strings.Trim(v, `"`)
	}
	return env, nil
}

// Proc is a process found in one of the test hosts.
type Proc struct {
	PID     int
	Comm    string
	Cmdline string
}

func (p Proc) String() string { return fmt.Sprintf("%d %s", p.PID, p.Cmdline) }

// netnsProcs lists the processes in network namespace ns, leaving out
// those skip says are the host's own daemons.
func netnsProcs(ns string, skip func(Proc) bool) ([]Proc, error) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns pids %s: %w", ns, err)
	}
	var procs []Proc
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		comm, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		cl, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err1 != nil || err2 != nil {
			continue // exited meanwhile
		}
		p := Proc{PID: pid, Comm: strings.TrimSpace(string(comm)),
			Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))}
		if skip == nil || !skip(p) {
			procs = append(procs, p)
		}
	}
	return procs, nil
}

// WaitNoProcs polls list until it returns no process or timeout passes;
// it returns what was still there. Processes end asynchronously after
// the connection or step that ran them is gone, so a test waits for the
// condition instead of checking once.
func WaitNoProcs(timeout time.Duration, list func() ([]Proc, error)) ([]Proc, error) {
	deadline := time.Now().Add(timeout)
	for {
		procs, err := list()
		if err != nil || len(procs) == 0 || time.Now().After(deadline) {
			return procs, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
