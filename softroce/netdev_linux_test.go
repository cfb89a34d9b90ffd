package softroce

import (
	"context"
	"encoding/json"

	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
)

// TestGuestNetdev runs third-party tools on the shared guest's netdev
// device that rxe0 on lo cannot serve: ibv_rc_pingpong
// at GID index 0 (IPv6 link-local), and rping and ucmatose, which resolve
// their peer through rdma_cm. While rping's client runs, the kernel's
// resource dump must show the QPs, CQs, MRs and PDs of both processes on
// rxe1; after both exit, none are left.
func TestGuestNetdev(t *testing.T) {
	for _, tool := range []string{"rping", "ucmatose"} {
		// CI installs rdmacm-utils, so there this never skips.
		if _, err := exec.LookPath(tool); err != nil {
			parts.Missing(t, "%s not installed (Debian package rdmacm-utils; scripts/setup.sh installs it)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	g := sharedGuest(t)

	n := g.Ready.Netdev
	if n == nil || !strings.Contains(n.PortState, "ACTIVE") || !strings.HasPrefix(n.GIDs["0"], "fe80:") || n.GIDs["1"] != ipv4MappedGID(NetdevAddr) {
		t.Fatalf("netdev device at ready: %+v", n)
	}
	if g.Ready.Device != rxeDevice || g.Ready.GIDs["1"] != rxeGID {
		t.Errorf("rxe0 changed: device %s, GIDs %v", g.Ready.Device, g.Ready.GIDs)
	}
	t.Logf("%s on %s (%s): GIDs %v; setup %v ms", n.Device, n.Netdev, n.Addr, n.GIDs, g.Ready.SetupMS)

	t.Run("gid0", func(t *testing.T) {
		common := []string{"ibv_rc_pingpong", "-d", NetdevRxe, "-g", "0", "-p", "18516", "-n", "100"}
		raw, err := g.Call(ctx, OpExecPair, ExecPairRequest{
			Server: ExecRequest{Argv: common, TimeoutMS: 60000},
			Client: ExecRequest{Argv: append(append([]string(nil), common...), NetdevAddr), TimeoutMS: 60000},
			Port:   18516,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var res ExecPairResult
		json.Unmarshal(raw, &res)
		if res.Server.ExitCode != 0 || res.Client.ExitCode != 0 {
			t.Fatalf("ibv_rc_pingpong at GID 0 on %s: server %d %s, client %d %s", NetdevRxe,
				res.Server.ExitCode, res.Server.Stderr, res.Client.ExitCode, res.Client.Stderr)
		}
		figs, err := ParsePingpong(res.Client.Stdout + res.Client.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ibv_rc_pingpong -g 0 on %s: %.1f usec/iter", NetdevRxe, figs["usec/iter"])
	})

	// A command that sees only the netdev device (as the vm backend runs
	// server and client commands) lists it alone, so the first device
	// it opens is rxe1, whatever the kernel's order; ibv_rc_pingpong
	// with no -d and GID index 0, unmodified, then connects.
	t.Run("only-device", func(t *testing.T) {
		all, err := g.Exec(ctx, 20*time.Second, "ibv_devinfo", "-l")
		if err != nil || !strings.Contains(all.Stdout, rxeDevice) || !strings.Contains(all.Stdout, NetdevRxe) {
			t.Fatalf("ibv_devinfo -l outside a view: %v %q", err, all.Stdout)
		}
		raw, err := g.Call(ctx, OpExec, ExecRequest{Argv: []string{"ibv_devinfo", "-l"}, OnlyDevice: NetdevRxe, TimeoutMS: 20000}, nil)
		var only ExecResult
		if err == nil {
			err = json.Unmarshal(raw, &only)
		}
		if got := strings.Fields(only.Stdout); err != nil || only.ExitCode != 0 || strings.Join(got, " ") != "1 HCA found: "+NetdevRxe {
			t.Fatalf("ibv_devinfo -l seeing only %s: %v, exit %d %q %q", NetdevRxe, err, only.ExitCode, only.Stdout, only.Stderr)
		}
		common := []string{"ibv_rc_pingpong", "-g", "0", "-p", "18517", "-n", "10"}
		raw, err = g.Call(ctx, OpExecPair, ExecPairRequest{
			Server: ExecRequest{Argv: common, TimeoutMS: 60000, OnlyDevice: NetdevRxe},
			Client: ExecRequest{Argv: append(append([]string(nil), common...), NetdevAddr), TimeoutMS: 60000, OnlyDevice: NetdevRxe},
			Port:   18517,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var res ExecPairResult
		json.Unmarshal(raw, &res)
		if res.Server.ExitCode != 0 || res.Client.ExitCode != 0 {
			t.Fatalf("ibv_rc_pingpong -g 0, no -d, seeing only %s: server %d %s, client %d %s", NetdevRxe,
				res.Server.ExitCode, res.Server.Stderr, res.Client.ExitCode, res.Client.Stderr)
		}
	})

	t.Run("rping", func(t *testing.T) {
		const port, count = "7174", 1000
		before := objectsByPID(t, ctx, g)
		type done struct {
			r   ExecResult
			err error
		}
		server := make(chan done, 1)
		go func() {
			r, err := g.Exec(ctx, 2*time.Minute, "rping", "-s", "-a", NetdevAddr, "-p", port, "-C", strconv.Itoa(count))
			server <- done{r, err}
		}()
		// Ready when the kernel holds a listening CM ID on the port.
		waitGuest(t, ctx, "rping to listen on "+port, func() bool {
			r, err := g.Exec(ctx, 20*time.Second, "rdma", "-j", "resource", "show", "cm_id")
			return err == nil && strings.Contains(r.Stdout, `"state":"LISTEN"`) && strings.Contains(r.Stdout, `:`+port+`"`)
		})
		client := make(chan done, 1)
		go func() {
			r, err := g.Exec(ctx, 2*time.Minute, "rping", "-c", "-v", "-a", NetdevAddr, "-p", port, "-C", strconv.Itoa(count))
			client <- done{r, err}
		}()
		var during map[int]map[string]int
		waitGuest(t, ctx, "both rping processes' objects on "+NetdevRxe, func() bool {
			during = objectsByPID(t, ctx, g)
			owners := 0
			for pid, m := range during {
				if pid != 0 && m["qp"] > 0 && m["cq"] > 0 && m["mr"] > 0 && m["pd"] > 0 {
					owners++
				}
			}
			return owners >= 2
		})
		t.Logf("kernel objects on %s by task while connected: %v (before: %v)", NetdevRxe, during, before)
		c, s := <-client, <-server
		if c.err != nil || s.err != nil {
			t.Fatalf("client %v, server %v", c.err, s.err)
		}
		if c.r.ExitCode != 0 || s.r.ExitCode != 0 {
			t.Fatalf("rping: client exit %d %q, server exit %d %q", c.r.ExitCode, tail(c.r.Stderr), s.r.ExitCode, tail(s.r.Stderr))
		}
		if got := strings.Count(c.r.Stdout, "ping data: rdma-ping-"); got != count {
			t.Errorf("client printed %d pings, want %d", got, count)
		}
		t.Logf("rping -C %d: client %.0f ms, server %.0f ms", count, c.r.DurationMS, s.r.DurationMS)
		after := objectsByPID(t, ctx, g)
		for pid, m := range after {
			if pid != 0 && m["qp"] > 0 {
				t.Errorf("task %d still owns %v on %s after rping exited", pid, m, NetdevRxe)
			}
		}
	})

	t.Run("ucmatose", func(t *testing.T) {
		const port = "7471"
		// 4 connections, 10 messages each, through one rdma_cm listener.
		args := []string{"-c", "4", "-C", "10", "-p", port}
		server := make(chan ExecResult, 1)
		go func() {
			r, _ := g.Exec(ctx, 2*time.Minute, append([]string{"ucmatose", "-b", NetdevAddr}, args...)...)
			server <- r
		}()
		waitGuest(t, ctx, "ucmatose to listen on "+port, func() bool {
			r, err := g.Exec(ctx, 20*time.Second, "rdma", "-j", "resource", "show", "cm_id")
			return err == nil && strings.Contains(r.Stdout, `:`+port+`"`)
		})
		c, err := g.Exec(ctx, 2*time.Minute, append([]string{"ucmatose", "-s", NetdevAddr}, args...)...)
		s := <-server
		if err != nil || c.ExitCode != 0 || s.ExitCode != 0 {
			t.Fatalf("ucmatose: client exit %d %v %q %q, server exit %d %q %q", c.ExitCode, err, tail(c.Stdout), tail(c.Stderr), s.ExitCode, tail(s.Stdout), tail(s.Stderr))
		}
		if !strings.Contains(c.Stdout, "test complete") || !strings.Contains(s.Stdout, "test complete") {
			t.Errorf("ucmatose did not complete:\nclient %s\nserver %s", c.Stdout, s.Stdout)
		}
	})
}

// objectsByPID counts rxe1's QPs, CQs, MRs and PDs by the task the kernel
// recorded (0 for the kernel's own).
func objectsByPID(t *testing.T, ctx context.Context, g *Guest) map[int]map[string]int {
	t.Helper()
	out := map[int]map[string]int{}
	for _, kind := range []string{"qp", "cq", "mr", "pd"} {
		r, err := g.Exec(ctx, 20*time.Second, "rdma", "-j", "resource", "show", kind)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("rdma resource show %s: %v %s", kind, err, r.Stderr)
		}
		var rows []struct {
			IfName string `json:"ifname"`
			PID    int    `json:"pid"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rows); err != nil {
			t.Fatalf("rdma resource show %s: %v: %s", kind, err, r.Stdout)
		}
		for _, row := range rows {
			if row.IfName != NetdevRxe {
				continue
			}
			if out[row.PID] == nil {
				out[row.PID] = map[string]int{}
			}
			out[row.PID][kind]++
		}
	}
	return out
}

// waitGuest polls cond (each poll is a command in the guest, so it paces
// itself) until it holds or the test's context ends.
func waitGuest(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
		}
	}
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = "…" + s[len(s)-300:]
	}
	return s
}
