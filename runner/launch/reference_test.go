package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// TestPerftestArgv: the pair's command lines carry the generators'
// device, port and GID index on both sides, and only the client names
// the server's address.
func TestPerftestArgv(t *testing.T) {
	srv, cli := PerftestArgv("ib_send_bw", protocol.Fabric{Backend: "verbs", Device: "mlx5_0", Port: 1, GIDIndex: 3}, 4096, 18516, "10.0.0.1")
	want := []string{"ib_send_bw", "-F", "-d", "mlx5_0", "-i", "1", "-x", "3", "-p", "18516", "-s", "4096", "-n", "5000"}
	if !reflect.DeepEqual(srv, want) {
		t.Errorf("server: %q, want %q", srv, want)
	}
	if !reflect.DeepEqual(cli, append(want, "10.0.0.1")) {
		t.Errorf("client: %q, want %q", cli, append(want, "10.0.0.1"))
	}
	// No device named: perftest takes the first, as the fabric does.
	srv, _ = PerftestArgv("ib_write_bw", protocol.Fabric{Backend: "verbs"}, 64, 18516, "10.0.0.1")
	if strings.Join(srv, " ") != "ib_write_bw -F -x 0 -p 18516 -s 64 -n 5000" {
		t.Errorf("server without a device: %q", srv)
	}
}

// TestPerftestOverSSH runs the reference's steps against SSH test hosts:
// the probe finds ib_send_bw on a host that has it (perftest is
// installed on the test machine, and the hosts share its filesystem) and
// not a program the host lacks, which is recorded as absent without
// running anything; and a present host's pair starts its server here,
// which on a machine without an RDMA device exits before it listens: a
// reference that says so and where, with nothing left running.
func TestPerftestOverSSH(t *testing.T) {
	if _, err := exec.LookPath("ib_send_bw"); err != nil {
		t.Fatal("ib_send_bw not on PATH: install perftest (scripts/setup.sh)")
	}
	hosts := sshHosts.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &SSH{cmd: hosts.SSHCommand(), hosts: []*sshHost{{Host: Host{Name: "h1", Slots: 1}}}}
	if has, err := s.HasTool(ctx, "h1", "ib_send_bw"); err != nil || !has {
		t.Errorf("ib_send_bw on h1: %v, %v; want found", has, err)
	}
	// A program here only: this test's directory is on this process's
	// PATH, not on the host's.
	dir := t.TempDir()
	const only = "rdmaprobe-test-only-here"
	if err := os.Symlink("/bin/false", filepath.Join(dir, only)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if has, err := s.HasTool(ctx, "h1", only); err != nil || has {
		t.Errorf("%s on h1: %v, %v; want not found", only, has, err)
	}
	var ref result.Reference
	s.pairReference(ctx, "h1", "srv", 18516, []string{only}, []string{only, "10.0.0.1"}, &ref)
	if !ref.Absent || ref.Error != "h1 has no "+only+": no reference across that path" || ref.Figures != nil {
		t.Errorf("a host without the tool: %+v", ref)
	}
	if _, err := s.HasTool(ctx, "no-such-host", "ib_send_bw"); err == nil {
		t.Error("a host SSH cannot reach: no error")
	}

	refs := s.DataPathReference(ctx, protocol.Fabric{Backend: "verbs"}, "send", 64, hosts.ServerAddr, nil)
	if len(refs) != 1 {
		t.Fatalf("references: %+v", refs)
	}
	r := refs[0]
	here, _ := os.Hostname()
	if r.Tool != "ib_send_bw" || r.Where != "server host "+here+" ↔ generator host h1" || r.Absent ||
		!strings.HasSuffix(r.Command, " -s 64 -n 5000 "+hosts.ServerAddr) {
		t.Errorf("reference: %+v", r)
	}
	if fabricDevices() {
		// Whether the host's network namespace reaches this device's
		// GID depends on the machine: a figure or an error, either is
		// recorded.
		if r.Error == "" && r.Figures["msg/s"] <= 0 {
			t.Errorf("a pair on a real device recorded nothing: %+v", r)
		}
		t.Logf("pair on this machine's device: %v %s", r.Figures["msg/s"], r.Error)
	} else if !strings.Contains(r.Error, "server on this host exited before it listened") {
		t.Errorf("without an RDMA device here: %+v", r)
	}
	// The server listened on a port free when the reference began, and
	// nothing listens there after it.
	f := strings.Fields(r.Command)
	i := slices.Index(f, "-p")
	port, err := strconv.Atoi(f[min(i+1, len(f)-1)])
	if i < 0 || err != nil || port == 0 {
		t.Fatalf("no port in %q", r.Command)
	}
	if command.TCPListening(port) {
		t.Errorf("something still listens on port %d", port)
	}
	noneLeft(t, hosts)
}

// fabricDevices reports whether this machine has an RDMA device.
func fabricDevices() bool {
	ds, _ := os.ReadDir("/sys/class/infiniband")
	return len(ds) > 0
}
