package report

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// A run whose generators ran on other hosts shows each host and its
// share of every point, with its faults, in both formats.
func TestHostsSection(t *testing.T) {
	env := &result.Environment{OS: "debian 12", Kernel: "6.1.0", CPUs: 4, MemoryBytes: 8 << 30,
		Device: &result.DeviceInfo{Name: "rxe2", Caps: fabric.Caps{MaxQP: 1048560},
			Port: fabric.PortInfo{Port: 1, State: "ACTIVE", GIDIndex: 1, GID: fabric.GID{10: 0xff, 11: 0xff, 12: 169, 13: 254, 14: 77, 15: 2}}}}
	run := &result.Run{Backend: result.Backend{Name: "vm"},
		Config: result.Config{Launcher: "ssh", ServerAddr: "169.254.77.1:0"},
		Hosts:  []result.Host{{Name: "peer", Launcher: "ssh", Slots: 2, Addr: "169.254.77.2", Exe: "/init", Environment: env}},
		Points: []result.Point{{Clients: 200, Trial: 1, Attempted: 200, Connected: 190, SuccessRate: 0.95,
			Hosts: []result.HostPoint{{Host: "peer", Generators: []int{0, 1}, Attempted: 200, Connected: 190, SuccessRate: 0.95,
				ConnectRate: 42.4, Usage: []result.GeneratorUsage{{RDMA: map[string]int{"qp": 190, "cq": 190, "mr": 8, "pd": 2}}},
				Faults: []result.HostFault{{Generator: 1, Class: result.FaultConnectionLost, Detail: "Connection to peer closed | by remote host."}}}}}}}
	m := NewModel(run)
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	html, err := HTML(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Load-generator hosts", "by ssh on 1 host(s); the server listened at 169.254.77.1:0",
		"| peer | 169.254.77.2 | debian 12, Linux 6.1.0, 4 CPUs, 8.0 GiB | rxe2 port 1 ACTIVE (max_qp 1048560) | ::ffff:169.254.77.2 (index 1) | `/init` |",
		"| 200 | 1 | peer | 2 | 190/200 | 95% | 42 | qp 190, cq 190, mr 8, pd 2 | generator 1 connection-lost: Connection to peer closed / by remote host. |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{`<section id="hosts">`, "<td class=\"l\">qp 190, cq 190, mr 8, pd 2</td>", "generator 1 connection-lost"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if m := NewModel(&result.Run{}); m.Hosts != nil || m.HostPoints != nil {
		t.Error("a run on this host alone has a hosts section")
	}
}
