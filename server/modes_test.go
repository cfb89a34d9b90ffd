package server_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// modeCost is the documented cost of a resource mode (see the package
// documentation): what one client adds, what each group of clients
// shares (its CQs and, in srq mode, its SRQ), and what the server holds
// from the start besides its PD (the pool).
type modeCost struct {
	perClient, perGroup, fixed map[string]int
}

var modeCosts = map[string]modeCost{
	server.ModePerClient: {perClient: map[string]int{"qp": 1, "cq": 2, "mr": 2}},
	server.ModeSharedCQ:  {perClient: map[string]int{"qp": 1, "mr": 2}, perGroup: map[string]int{"cq": 2}},
	server.ModePool:      {perClient: map[string]int{"qp": 1}, perGroup: map[string]int{"cq": 2}, fixed: map[string]int{"mr": 1}},
	server.ModeSRQ:       {perClient: map[string]int{"qp": 1}, perGroup: map[string]int{"cq": 2, "srq": 1}, fixed: map[string]int{"mr": 1}},
	server.ModeUD:        {perClient: map[string]int{"ah": 1}, perGroup: map[string]int{"cq": 2, "qp": 1}, fixed: map[string]int{"mr": 1}},
	// Per QP, which carries up to Config.Mux logical clients.
	server.ModeMux: {perClient: map[string]int{"qp": 1, "cq": 2, "mr": 2}},
}

// plus returns base + Σ n × m over the (n, m) pairs, key by key.
func plus(base map[string]int, terms ...any) map[string]int {
	out := maps.Clone(base)
	for i := 0; i < len(terms); i += 2 {
		n, m := terms[i].(int), terms[i+1].(map[string]int)
		for k, v := range m {
			out[k] += n * v
		}
	}
	return out
}

func TestModesListed(t *testing.T) {
	if got, want := server.Modes, []string{"per-client", "shared-cq", "pool", "srq", "ud", "mux"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Modes %v, want %v", got, want)
	}
	for _, m := range server.Modes {
		if err := server.ValidMode(m); err != nil {
			t.Errorf("%s: %v", m, err)
		}
		if _, ok := modeCosts[m]; !ok {
			t.Errorf("mode %s has no documented cost in this test", m)
		}
	}
	if err := server.ValidMode("shared"); err == nil || !strings.Contains(err.Error(), "per-client, shared-cq, pool, srq, ud") {
		t.Errorf("unknown mode: %v", err)
	}
}

// Every mode: waves of clients connect concurrently and verify their round
// trips; while they are connected the fabric holds exactly the documented
// cost (per client, per group of clients, fixed); when they leave it is
// back to the fixed shared objects, and a second wave reuses them (pool
// slots handed back, SRQ buffers reposted); when the server stops,
// everything is released. With the sim's max_cqe of 8 a group holds 4
// clients, so 10 clients need 3 groups. In srq mode every SRQ buffer is
// posted again once the clients have left; with an SRQ of one buffer the
// clients' messages mostly find it empty and wait (RNR) for the echoes
// before theirs.
func TestModes(t *testing.T) {
	const n = 10
	for _, tt := range []struct {
		mode     string
		maxCQE   int
		srqDepth int
	}{
		{server.ModePerClient, 0, 0},
		{server.ModeSharedCQ, 0, 0},
		{server.ModePool, 0, 0},
		{server.ModeSRQ, 0, 0},
		{server.ModeSharedCQ, 8, 0},
		{server.ModePool, 8, 0},
		{server.ModeSRQ, 8, 0},
		{server.ModeSRQ, 0, 1},
		{server.ModeSRQ, 8, 1},
		{server.ModeUD, 0, 0},
		{server.ModeUD, 8, 0},
	} {
		name := tt.mode
		if tt.maxCQE > 0 {
			name += "/max_cqe=8"
		}
		if tt.srqDepth > 0 {
			name += fmt.Sprintf("/srq_depth=%d", tt.srqDepth)
		}
		t.Run(name, func(t *testing.T) {
			h := newHarnessOpts(t, n, harnessOpts{mode: tt.mode, simCaps: fabric.Caps{MaxCQE: tt.maxCQE}, rounds: 5, srqDepth: tt.srqDepth})
			caps := h.srv.Device().Caps()
			if tt.maxCQE > 0 && caps.MaxCQE != tt.maxCQE {
				t.Skipf("the device's max_cqe is %d, not the sim's %d", caps.MaxCQE, tt.maxCQE)
			}
			if _, ok := h.inUse()["ah"]; tt.mode == server.ModeUD && !ok {
				t.Skip("the kernel's resource tracking counts no address handles")
			}
			cost := modeCosts[tt.mode]
			perGroup := min(caps.MaxCQE/server.QPMaxRecvWR, n)
			if tt.mode == server.ModeUD {
				perGroup = min(caps.MaxCQE/server.UDBuffers, n)
			}
			groups := 0
			if cost.perGroup != nil {
				groups = (n + perGroup - 1) / perGroup
			}
			// Before any client: the server's PD and the fixed objects.
			if want := plus(h.idle, 1, map[string]int{"pd": 1}, 1, cost.fixed); !reflect.DeepEqual(h.baseline, want) {
				t.Errorf("idle server holds %v, want %v (PD + %v)", h.baseline, want, cost.fixed)
			}
			ctx := context.Background()
			for wave := 1; wave <= 2; wave++ {
				recs, conns, _ := client.Run(ctx, h.dialer, client.Load{N: n}, nil)
				for _, r := range recs {
					if r.Outcome != "ok" {
						t.Fatalf("wave %d: client %d: %s: %s", wave, r.ID, r.Outcome, r.Error)
					}
				}
				got := h.inUse()
				want := plus(h.baseline, n, cost.perClient, groups, cost.perGroup, 1, h.clientHeld(n))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("wave %d, %d clients connected: fabric holds %v, want %v", wave, n, got, want)
				}
				t.Logf("wave %d: %d clients, each %d verified round trips; fabric %v (baseline %v, %d groups of ≤ %d)",
					wave, n, h.rounds, got, h.baseline, groups, perGroup)
				client.CloseAll(conns)
				left := plus(h.baseline, groups, cost.perGroup)
				if !eventually.Within(guard, func() bool { return reflect.DeepEqual(h.inUse(), left) }) {
					t.Fatalf("wave %d: after the clients left the fabric holds %v, want %v", wave, h.inUse(), left)
				}
				if tt.mode == server.ModeSRQ {
					depth := min(max(2*perGroup, server.MinSRQDepth), server.DefaultSRQDepth)
					if tt.srqDepth > 0 {
						depth = tt.srqDepth
					}
					eventually.True(t, guard, "every SRQ buffer is posted again", func() bool {
						posted, total := h.srv.SRQBuffers()
						return posted == total && total == groups*depth
					})
				}
			}
			// A release is counted last, after its resources are gone.
			eventually.Within(guard, func() bool { return h.srv.Stats().Released == 2*n })
			st := h.srv.Stats()
			if st.Connected != 2*n || st.Released != 2*n || st.PeakActive != n || len(st.Failures) != 0 {
				t.Errorf("stats: connected %d, released %d, peak %d, failures %v", st.Connected, st.Released, st.PeakActive, st.Failures)
			}
			h.stop()
			if !eventually.Within(guard, func() bool { return reflect.DeepEqual(h.inUse(), h.idle) }) {
				t.Errorf("after the server stopped the fabric holds %v, want %v", h.inUse(), h.idle)
			}
		})
	}
}

// Configurations a mode cannot serve are refused by New, before anything
// is allocated on the device.
func TestModeConfigErrors(t *testing.T) {
	pair, err := certs.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	stls, err := pair.Server()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		mode       string
		maxClients int
		msg        int
		caps       fabric.Caps
		want       string
	}{
		{"unknown mode", "shared", 10, 256, fabric.Caps{}, `unknown resource mode "shared"`},
		{"pool above max_mr_size", server.ModePool, 1000, 4096, fabric.Caps{MaxMRSize: 1 << 20}, "exceeds the device's max_mr_size"},
		{"srq pool above max_mr_size", server.ModeSRQ, 1000, 4096, fabric.Caps{MaxMRSize: 1 << 20}, "exceeds the device's max_mr_size"},
		{"pool beyond max_mr", server.ModeSRQ, 10, 256, fabric.Caps{MaxMR: 1}, "ibv_reg_mr: ENOMEM"},
		{"ud message above the MTU", server.ModeUD, 10, 4097, fabric.Caps{}, "--msg-size 4097 is above the path MTU of sim0 (4096 bytes)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := sim.New(sim.Options{Caps: tt.caps})
			if tt.caps.MaxMR == 1 {
				// The one MR the device allows is taken.
				dev, err := p.Open(context.Background(), fabric.DeviceConfig{GIDIndex: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer dev.Close()
				pd, err := dev.AllocPD()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := pd.RegMR(64, fabric.AccessLocalWrite); err != nil {
					t.Fatal(err)
				}
			}
			before := p.InUse()
			_, err := server.New(context.Background(), server.Config{Listen: "127.0.0.1:0", MaxClients: tt.maxClients,
				Mode: tt.mode, TLS: stls, Provider: p, Device: fabric.DeviceConfig{GIDIndex: -1}, MsgSize: tt.msg})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.want)
			}
			if after := p.InUse(); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused configuration left %v on the device (before %v)", after, before)
			}
		})
	}
}
