package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

func TestParseHosts(t *testing.T) {
	got, err := ParseHosts("h1, user@h2:4,[fe80::1%eth0]:2,fe80::2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{{Name: "h1", Slots: 1}, {Name: "user@h2", Slots: 4}, {Name: "fe80::1%eth0", Slots: 2}, {Name: "fe80::2", Slots: 1}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("host %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", ",", "h1:0", "h1:x"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestReadHostfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(p, []byte("# lab\nh1 slots=2\n\nh2 exe=/opt/rdmaprobe max_slots=8  # bigger\n"), 0o644)
	got, err := ReadHostfile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (Host{Name: "h1", Slots: 2}) || got[1] != (Host{Name: "h2", Slots: 1, Exe: "/opt/rdmaprobe"}) {
		t.Errorf("%+v", got)
	}
	if Slots(got) != 3 {
		t.Errorf("slots %d", Slots(got))
	}
	os.WriteFile(p, []byte("h1 slots=two\n"), 0o644)
	if _, err := ReadHostfile(p); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("bad slots: %v", err)
	}
	os.WriteFile(p, []byte("h1 color=blue\n"), 0o644)
	if _, err := ReadHostfile(p); err == nil {
		t.Error("unknown key accepted")
	}
}

func TestSlurmAllocation(t *testing.T) {
	got, err := allocationNodes("node[01-03,7],login1", "2(x3),1,4")
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{{"node01", 2, ""}, {"node02", 2, ""}, {"node03", 2, ""}, {"node7", 1, ""}, {"login1", 4, ""}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("node %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range [][2]string{{"node[3-1]", "1"}, {"node[1-2", "1"}, {"a,b", "1"}, {"a", "x"}} {
		if _, err := allocationNodes(bad[0], bad[1]); err == nil {
			t.Errorf("%q %q accepted", bad[0], bad[1])
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain/path-1.2": "plain/path-1.2",
		"":               "''",
		"a b":            "'a b'",
		`it's`:           `'it'\''s'`,
		`"$@"; x`:        `'"$@"; x'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestFaultClasses: ssh exits 255 for its own errors; the wrapper's exit
// event tells the generator's own end apart.
func TestFaultClasses(t *testing.T) {
	status := func(n int) *int { return &n }
	s, sl := &SSH{}, &Slurm{}
	for _, tc := range []struct {
		l     runner.RemoteLauncher
		e     runner.Ended
		class string
	}{
		{s, runner.Ended{Code: 255, Stderr: "ssh: connect to host h2 port 22: No route to host"}, result.FaultUnreachable},
		{s, runner.Ended{Started: true, Code: 255, Stderr: "Connection to h1 closed by remote host."}, result.FaultConnectionLost},
		{s, runner.Ended{Started: true, Code: 255, Exit: status(137)}, result.FaultDied},
		{s, runner.Ended{Started: true, Code: 1, Exit: status(1)}, result.FaultDied},
		{s, runner.Ended{Started: true, Code: 3}, result.FaultLauncher},
		{sl, runner.Ended{Code: 1, Stderr: "srun: error: Unable to create step"}, result.FaultUnreachable},
		{sl, runner.Ended{Started: true, Code: 137, Exit: status(137)}, result.FaultDied},
		{sl, runner.Ended{Started: true, Code: 1}, result.FaultConnectionLost},
	} {
		if class, _ := tc.l.Fault(0, tc.e); class != tc.class {
			t.Errorf("%T %+v: %s, want %s", tc.l, tc.e, class, tc.class)
		}
	}
	if _, d := s.Fault(0, runner.Ended{Started: true, Exit: status(137)}); d != "killed by signal 9" {
		t.Errorf("detail %q", d)
	}
}
