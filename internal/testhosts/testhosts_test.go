package testhosts

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
)

// TestSSHHosts logs in to every host and checks that each is its own
// machine on the network: its own address, reachable from here, and a
// program run there is seen there and ends when its session does.
func TestSSHHosts(t *testing.T) {
	s := StartSSH(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, h := range s.Hosts {
		out, err := s.Command(ctx, h, "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", h, err, out)
		}
		if !strings.Contains(string(out), " "+s.Addrs[i]+"/24") {
			t.Errorf("%s has %q, want address %s", h, out, s.Addrs[i])
		}
		// The host reaches this machine on the link: what a generator
		// there needs to reach a server here.
		out, err = s.Command(ctx, h, "ip", "-4", "route", "get", s.ServerAddr).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "dev eth0") {
			t.Errorf("%s: route to %s: %v %s", h, s.ServerAddr, err, out)
		}
	}
	b, err := os.ReadFile(s.Hostfile)
	if err != nil || string(b) != "h1 slots=2\nh2 slots=2\n" {
		t.Errorf("hostfile %q %v", b, err)
	}

	t.Run("session-end-ends-program", func(t *testing.T) {
		// `cat` on h1 holds until its stdin ends: close it and the
		// remote cat must go, leaving only sshd behind.
		cmd := s.Command(ctx, "h1", "cat")
		in, _ := cmd.StdinPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitProgram(t, s, "h1", "cat")
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("ssh h1 cat: %v", err)
		}
		if left, err := WaitNoProcs(10*time.Second, func() ([]Proc, error) { return s.Procs("h1") }); err != nil || len(left) > 0 {
			t.Errorf("left on h1 after the session: %v %v", left, err)
		}
	})

	t.Run("dropped-session", func(t *testing.T) {
		cmd := s.Command(ctx, "h2", "cat")
		in, _ := cmd.StdinPipe()
		defer in.Close()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitProgram(t, s, "h2", "cat")
		n, err := s.DropSessions("h2")
		if err != nil || n == 0 {
			t.Fatalf("DropSessions: %d, %v", n, err)
		}
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 {
			t.Errorf("ssh after its connection dropped: %v (%s), want exit 255", err, stderr.String())
		}
		if left, err := WaitNoProcs(10*time.Second, func() ([]Proc, error) { return s.Procs("h2") }); err != nil || len(left) > 0 {
			t.Errorf("left on h2 after the drop: %v %v", left, err)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		if err := s.SetLink("h2", false); err != nil {
			t.Fatal(err)
		}
		defer s.SetLink("h2", true)
		cmd := s.Command(ctx, "h2", "true")
		cmd.Args = append(cmd.Args[:1], append([]string{"-o", "ConnectTimeout=1"}, cmd.Args[1:]...)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 {
			t.Errorf("ssh to a host whose link is down: %v %s, want exit 255", err, out)
		}
	})
}

func waitProgram(t *testing.T, s *SSH, host, comm string) {
	t.Helper()
	var procs []Proc
	if !eventually.Within(20*time.Second, func() bool {
		var err error
		if procs, err = s.Programs(host); err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if p.Comm == comm {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("%s not running on %s after 20 s: %v", comm, host, procs)
	}
}

// TestSlurm runs tasks through srun inside an allocation, and a step
// whose task fails.
func TestSlurm(t *testing.T) {
	c := StartSlurm(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Command(ctx, "salloc", "-N1", "-n3", "srun", "-n3", "sh", "-c", `echo "$SLURM_PROCID $SLURMD_NODENAME"`).Output()
	if err != nil {
		t.Fatalf("salloc srun: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sort.Strings(lines)
	want := []string{"0 " + c.Node, "1 " + c.Node, "2 " + c.Node}
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		t.Errorf("tasks said %q, want %q", lines, want)
	}

	// One task of three fails: srun says which and exits non-zero.
	cmd := c.Command(ctx, "salloc", "-N1", "-n2", "srun", "-n2", "sh", "-c", `exit $((SLURM_PROCID * 3))`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("a failed task: %v, want a non-zero exit", err)
	}
	if !strings.Contains(stderr.String(), "task 1: Exited with exit code 3") {
		t.Errorf("srun's report of the failed task: %q", stderr.String())
	}
	if left, err := WaitNoProcs(15*time.Second, c.Procs); err != nil || len(left) > 0 {
		t.Errorf("left in the cluster after the jobs: %v %v", left, err)
	}
}

// TestScriptsDown checks that down is idempotent on a set that is gone
// and on a directory that never had one.
func TestScriptsDown(t *testing.T) {
	need(t, "scripts", "ip")
	for _, name := range []string{"testhosts.sh", "testslurm.sh"} {
		dir := t.TempDir()
		for range 2 {
			cmd := exec.Command(filepath.Join(scriptsDir(), name), "down", dir)
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			if err := cmd.Run(); err != nil {
				t.Errorf("%s down on an empty dir: %v", name, err)
			}
		}
		out, err := exec.Command(filepath.Join(scriptsDir(), name), "bogus").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "usage") {
			t.Errorf("%s bogus: %v %s", name, err, out)
		}
	}
}
