package app

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/testhosts"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// TestSearchOnSSHHosts runs the README's command for generators on other
// hosts, as a user would: the rdmaprobe binary (not this test) searches
// with its generators on two SSH hosts, copies itself there, and the run
// and its report have each host's figures; nothing is left on the hosts.
func TestSearchOnSSHHosts(t *testing.T) {
	hosts := sshHosts.Get(t)
	exe := testhosts.Binary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "search", "--backend", "sim", "--hosts", "h1,h2",
		"--ssh", "ssh -F "+hosts.Config, "--lo", "20", "--hi", "40", "--traffic", "0", "--calibrate", "0", "--results", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("search: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, h := range hosts.Hosts[:2] {
		if !strings.Contains(out, "host "+h+" (") || !strings.Contains(out, "        "+h+": ") {
			t.Errorf("output does not show host %s:\n%s", h, out)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "*", "run.json"))
	if len(runs) != 1 {
		t.Fatalf("runs saved: %v", runs)
	}
	run, err := result.Load(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Hosts) != 2 || run.Config.Launcher != "ssh" || !strings.HasPrefix(run.Config.ServerAddr, hosts.ServerAddr+":") {
		t.Errorf("run hosts %+v, launcher %q, server %q", run.Hosts, run.Config.Launcher, run.Config.ServerAddr)
	}
	if len(run.Points) == 0 {
		t.Fatal("no points")
	}
	for _, p := range run.Points {
		if len(p.Hosts) != 2 || p.Hosts[0].Connected+p.Hosts[1].Connected != p.Connected || p.Connected != p.Clients {
			t.Errorf("%d clients: %d connected, hosts %+v", p.Clients, p.Connected, p.Hosts)
		}
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(runs[0]), "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Load-generator hosts", "| h1 | " + hosts.Addrs[0], "| h2 | " + hosts.Addrs[1]} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, h := range hosts.Hosts {
		if left, err := testhosts.WaitNoProcs(20*time.Second, func() ([]testhosts.Proc, error) { return hosts.Programs(h) }); err != nil || len(left) > 0 {
			t.Errorf("left on %s: %v %v", h, left, err)
		}
	}
}

// TestRemoteBadInput: flags that do not go together, a hostfile that
// does not parse and a host that cannot be reached each end the command
// with one line naming the problem.
func TestRemoteBadInput(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hf, []byte("h1 slots=many\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ramp", "--backend", "sim", "--hosts", "a", "--hostfile", hf}, ExitUsage, "--hosts and --hostfile: give one"},
		{[]string{"ramp", "--backend", "sim", "--hostfile", hf}, ExitUsage, hf + ":1: slots=many must be a positive number"},
		{[]string{"ramp", "--backend", "sim", "--hosts", "a:0"}, ExitUsage, `slots of "a:0" must be a positive number`},
		{[]string{"ramp", "--backend", "sim", "--launcher", "pdsh", "--hosts", "a"}, ExitUsage, `--launcher "pdsh": want ssh or slurm`},
		{[]string{"ramp", "--backend", "sim", "--launcher", "slurm"}, ExitUsage, "not inside a Slurm allocation"},
		{[]string{"ramp", "--backend", "sim", "--server-addr", "0.0.0.0"}, ExitUsage, "the generators need the address they dial"},
		{[]string{"ramp", "--backend", "vm", "--hosts", "a"}, ExitUsage, "not in the vm backend's guest"},
		{[]string{"ramp", "--backend", "sim", "--server-host", "a"}, ExitUsage, "--server-host needs --server-addr"},
	} {
		t.Setenv("SLURM_JOB_ID", "")
		_, errOut, code := run(t, tc.args...)
		if code != tc.code || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line with %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}

	t.Run("unreachable", func(t *testing.T) {
		// The rdmaprobe binary, not this test's: the launcher copies
		// itself to the hosts.
		hosts := sshHosts.Get(t)
		exe := testhosts.Binary(t)
		if err := hosts.SetLink("h2", false); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := hosts.SetLink("h2", true); err != nil {
				t.Error(err)
			}
		})
		// h2's link is down, so its login waits out ssh's ConnectTimeout:
		// the 2 s given in --ssh, not the 5 s of the hosts' own ssh_config
		// or the launcher's 10 s (options given in --ssh come first and
		// win).
		cmd := exec.Command(exe, "ramp", "--backend", "sim", "--hosts", "h1,h2", "--ssh", "ssh -F "+hosts.Config+" -o ConnectTimeout=2",
			"--clients", "10", "--calibrate", "0", "--results", t.TempDir())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run()
		code, errOut := cmd.ProcessState.ExitCode(), stderr.String()
		if code != ExitRunError || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "host h2: ssh: connect to host "+hosts.Addrs[1]) {
			t.Errorf("exit %d, stderr %q; want one line naming h2's ssh error", code, errOut)
		}
		for _, h := range hosts.Hosts {
			if left, _ := testhosts.WaitNoProcs(20*time.Second, func() ([]testhosts.Proc, error) { return hosts.Programs(h) }); len(left) > 0 {
				t.Errorf("left on %s: %v", h, left)
			}
		}
	})
}

// TestScalePastOneHost: each generator host is given room for 50 of the
// exchange's TCP connections (net.ipv4.ip_local_port_range). 120 clients
// from one host hit that wall, and the run says the generators, not the
// server, limited it; from three hosts (40 each) all connect.
func TestScalePastOneHost(t *testing.T) {
	hosts := sshHosts.Get(t)
	exe := testhosts.Binary(t)
	const ports = "net.ipv4.ip_local_port_range"
	for _, h := range hosts.Hosts {
		was, err := exec.Command("ip", "netns", "exec", hosts.NetNS(h), "sysctl", "-n", ports).Output()
		if err != nil {
			t.Fatal(err)
		}
		if err := hosts.Sysctl(h, ports, "40000 40049"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := hosts.Sysctl(h, ports, strings.Join(strings.Fields(string(was)), " ")); err != nil {
				t.Error(err)
			}
		})
	}
	ramp := func(hostList string) *result.Run {
		t.Helper()
		dir := t.TempDir()
		cmd := exec.Command(exe, "ramp", "--backend", "sim", "--hosts", hostList, "--ssh", "ssh -F "+hosts.Config,
			"--clients", "120", "--timeout", "20s", "--traffic", "0", "--calibrate", "0", "--results", dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		t.Logf("--hosts %s: exit %d\n%s%s", hostList, cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
		return loadOnlyRun(t, dir)
	}
	one := ramp("h1")
	d := one.Diagnosis
	if p := one.Points[0]; p.Connected >= 120 || d == nil || d.Limit != "generator:ephemeral-ports" || !strings.Contains(d.Summary, "not the server's: h1 ") {
		t.Errorf("one host: %d connected, diagnosis %+v", p.Connected, d)
	}
	three := ramp("h1,h2,h3")
	if p := three.Points[0]; p.Connected != 120 || len(p.Hosts) != 3 || three.Diagnosis != nil {
		t.Errorf("three hosts: %d connected, hosts %+v, diagnosis %+v", p.Connected, p.Hosts, three.Diagnosis)
	}
}
