package app

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// udArgs are a lean sim ramp of --mode ud's own.
func udArgs(root string, extra ...string) []string {
	return append([]string{"ramp", "--backend", "sim", "--rounds", "1", "--msg-size", "64", "--calibrate", "0",
		"--sample-interval", "0", "--results", root}, extra...)
}

// A ud server holds no QP per client: with the device's max_qp at 300
// it serves 600 clients, where per-client mode stops at 300.
func TestUDHoldsMoreClientsThanQPs(t *testing.T) {
	for _, c := range []struct {
		mode string
		want int
	}{{"ud", 600}, {"per-client", 300}} {
		t.Run(c.mode, func(t *testing.T) {
			root := t.TempDir()
			out, errOut, code := run(t, udArgs(root, "--mode", c.mode, "--clients", "600", "--sim-max-qp", "300", "--traffic", "0")...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			p := loadOnlyRun(t, root).Points[0]
			if p.Connected != c.want {
				t.Fatalf("%s: %d of 600 connected, want %d; outcomes %v", c.mode, p.Connected, c.want, p.Outcomes)
			}
			if c.mode == "ud" && (p.Server.Resources["qp"] != 1 || p.Server.Resources["ah"] != 600) {
				t.Errorf("ud server held %v, want 1 QP and 600 AHs", p.Server.Resources)
			}
		})
	}
}

// A datagram lost on purpose (the simulated server device drops every
// 20th) is counted as lost, and the point fails errors=0.
func TestUDLossCounted(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, udArgs(root, "--mode", "ud", "--clients", "3", "--traffic", "1s",
		"--msg-timeout", "1s", "--sim-ud-loss", "20")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	p := loadOnlyRun(t, root).Points[0]
	if p.Connected != 3 {
		t.Fatalf("%d of 3 connected: %v", p.Connected, p.Outcomes)
	}
	tr := p.Traffic
	if tr == nil || tr.Errors[result.TrafficLost] == 0 {
		t.Fatalf("no message counted lost: %+v", tr)
	}
	if tr.SLOPassed {
		t.Errorf("the point passed its SLOs with %d messages lost", tr.Errors[result.TrafficLost])
	}
	if !strings.Contains(out, "max sustainable (errors=0): 0") {
		t.Errorf("the summary does not fail errors=0:\n%s", out)
	}
}

// A message larger than the path MTU cannot be one datagram: refused in
// one line before any client starts.
func TestUDMsgSizeAboveMTU(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, udArgs(root, "--mode", "ud", "--clients", "2", "--msg-size", "8192")...)
	if code == 0 {
		t.Fatalf("exit 0 with --msg-size 8192 in ud mode\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "--msg-size 8192 is above the path MTU of sim0 (4096 bytes)") {
		t.Fatalf("stderr %q, want one line naming the size and the MTU", errOut)
	}
}
