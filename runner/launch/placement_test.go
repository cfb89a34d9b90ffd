package launch

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// Resolve reads the hosts, picks the launcher and refuses placements
// that cannot work, before anything starts.
func TestPlacementResolve(t *testing.T) {
	cmd := func(p Placement) *Placement { p.SSH, p.Srun = []string{"ssh"}, []string{"srun"}; return &p }
	withAddr := runner.Spec{Listen: "192.0.2.1:0"}
	for _, tc := range []struct {
		p      *Placement
		spec   runner.Spec
		remote bool
		want   string // error text, "" for none
	}{
		{cmd(Placement{}), runner.Spec{}, false, ""},
		{cmd(Placement{Hosts: "a:2,b"}), runner.Spec{}, true, ""},
		{cmd(Placement{Hosts: "a", Hostfile: "f"}), runner.Spec{}, false, "--hosts and --hostfile: give one"},
		{cmd(Placement{Launcher: "ssh"}), runner.Spec{}, false, "--launcher ssh needs --hosts or --hostfile"},
		{cmd(Placement{Launcher: "mpi", Hosts: "a"}), runner.Spec{}, false, `--launcher "mpi": want ssh or slurm`},
		{cmd(Placement{ServerHost: "s"}), runner.Spec{}, false, "--server-host needs --server-addr"},
		{cmd(Placement{ServerHost: "s"}), runner.Spec{Listen: "x", Server: &protocol.ServerCommand{}}, false, "not with --server-cmd"},
		{cmd(Placement{ServerHost: "s"}), withAddr, true, ""},
		{&Placement{Hosts: "a"}, runner.Spec{}, false, "--ssh and --srun must name a command"},
	} {
		remote, err := tc.p.Resolve(tc.spec)
		if remote != tc.remote || (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: remote %v, %v; want %v, %q", *tc.p, remote, err, tc.remote, tc.want)
		}
	}
	p := cmd(Placement{Hosts: "a:2,b"})
	if _, err := p.Resolve(runner.Spec{}); err != nil || p.Launcher != "ssh" || p.Slots() != 3 {
		t.Errorf("--hosts a:2,b: launcher %q, %d slots, %v", p.Launcher, p.Slots(), err)
	}
}
