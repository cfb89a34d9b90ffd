package app

import (
	"strings"
	"testing"
)

// Each limit, reproduced on purpose on the simulated fabric, is named by
// the diagnosis with its evidence, in the JSON and in the terminal.
func TestDiagnosisNamesLimits(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		limit    string
		evidence []string
	}{
		{"max-clients", []string{"--clients", "30", "--max-clients", "20"}, "max-clients",
			[]string{"--max-clients 20"}},
		{"device cap", []string{"--clients", "60", "--sim-max-qp", "50"}, "device-cap:max_qp",
			[]string{"10 clients failed (ibv_create_qp: EINVAL), 50 of 60 connected", "50 QPs of max_qp 50"}},
		// Logical clients 10 to a QP: the same wall holds 10 times the
		// clients.
		{"device cap, mux", []string{"--clients", "300", "--sim-max-qp", "20", "--mode", "mux", "--mux", "10"}, "device-cap:max_qp",
			[]string{"100 clients failed (ibv_create_qp: EINVAL), 200 of 300 connected", "20 QPs of max_qp 20"}},
		{"open files", []string{"--clients", "100", "--nofile", "64", "--timeout", "1500ms"}, "rlimit-nofile",
			[]string{"RLIMIT_NOFILE 64"}},
		// A burst of 1,000 connects at a listen queue of 1.
		{"listen backlog", []string{"--clients", "1000", "--backlog", "1", "--timeout", "1500ms"}, "listen-backlog",
			[]string{"listen queue overflowed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			args := append([]string{"ramp", "--backend", "sim", "--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0",
				"--results", root}, c.args...)
			out, errOut, code := run(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			r := loadOnlyRun(t, root)
			d := r.Diagnosis
			if d == nil {
				t.Fatalf("no diagnosis; point %+v", r.Points[0].Outcomes)
			}
			if d.Limit != c.limit {
				t.Fatalf("limit %q, want %q: %s\nevidence %q", d.Limit, c.limit, d.Summary, d.Evidence)
			}
			for _, e := range c.evidence {
				if !strings.Contains(d.Summary, e) {
					t.Errorf("summary %q lacks %q", d.Summary, e)
				}
			}
			if !strings.Contains(out, "limiting factor: "+d.Summary) {
				t.Errorf("terminal lacks the diagnosis:\n%s", out)
			}
			p := r.Points[0]
			if p.Limits == nil || p.LimitsAfter == nil || len(p.Samples) == 0 || p.Peak == nil {
				t.Errorf("point lacks limits or samples: limits %v after %v samples %d", p.Limits, p.LimitsAfter, len(p.Samples))
			}
		})
	}
}

// --detach lifts the open-files wall the "open files" case above hits:
// with the server's RLIMIT_NOFILE at 64, 100 clients connect, since the
// server closes each control connection once the client is accepted, and
// the server's sampled descriptors stay below one per client. (The
// handshakes in progress still hold one each: --inflight 16 keeps them
// under the limit.)
func TestDetachPassesOpenFilesLimit(t *testing.T) {
	root := t.TempDir()
	out, errOut, code := run(t, "ramp", "--backend", "sim", "--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", root,
		"--clients", "100", "--nofile", "64", "--timeout", "20s", "--detach", "--inflight", "16", "--mode", "srq", "--sample-interval", "50ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	r := loadOnlyRun(t, root)
	p := r.Points[0]
	if p.Connected != 100 || r.Diagnosis != nil {
		t.Fatalf("%d/100 connected under RLIMIT_NOFILE 64 with --detach; diagnosis %+v", p.Connected, r.Diagnosis)
	}
	if !r.Config.Detach {
		t.Error("config.detach not recorded")
	}
	if p.Peak == nil || p.Peak.ServerFDs == 0 || p.Peak.ServerFDs >= 64 {
		t.Errorf("server's peak open files %+v, want some and under 64", p.Peak)
	}
	if p.Server.Goodbyes != 100 || len(p.Server.Failures) != 0 {
		t.Errorf("server stats %+v: want 100 released on goodbyes and no failures", p.Server)
	}
}

// A passing sim point carries samples of the server and load generator,
// the server's own fabric counts, and the per-client cost of the mode.
func TestSamplesAndCostOnSim(t *testing.T) {
	// Per-client cost by mode (docs/resource-modes.md). Shared objects (the
	// group CQs, SRQs, the pool MR, the PD) are counted too, spread over the
	// clients: 1 pool MR over 40 clients reads 0.03 per client; -1 below
	// means "fewer than one per client".
	for _, mode := range []struct {
		name       string
		qp, cq, mr float64
	}{{"per-client", 1, 2, 2}, {"shared-cq", 1, -1, 2}, {"pool", 1, -1, -1}, {"srq", 1, -1, -1}} {
		t.Run(mode.name, func(t *testing.T) {
			root := t.TempDir()
			out, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "40", "--mode", mode.name,
				"--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", root)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			p := loadOnlyRun(t, root).Points[0]
			if p.Diagnosis != nil {
				t.Errorf("passing point diagnosed: %+v", p.Diagnosis)
			}
			roles := map[string]bool{}
			for _, s := range p.Samples {
				for _, ps := range s.Procs {
					if ps.RSS > 0 && ps.FDs > 0 && ps.Maps > 0 {
						roles[ps.Role] = true
					}
				}
			}
			if !roles["server"] || !roles["clients-0"] {
				t.Errorf("processes sampled: %v", roles)
			}
			c := p.Cost
			if c == nil || c.Clients != 40 || c.QPs != mode.qp || c.ServerRSS <= 0 {
				t.Fatalf("cost %+v, want %v QP per client", c, mode.qp)
			}
			for _, x := range []struct {
				what      string
				got, want float64
			}{{"CQs", c.CQs, mode.cq}, {"MRs", c.MRs, mode.mr}} {
				if (x.want >= 0 && x.got != x.want) || (x.want < 0 && (x.got >= 1 || x.got <= 0)) {
					t.Errorf("%s mode: %v %s per client, want %v (-1: shared, between 0 and 1)", mode.name, x.got, x.what, x.want)
				}
			}
			if srq := p.Server.Resources["srq"]; (mode.name == "srq") != (srq > 0) {
				t.Errorf("%s mode: the server held %d SRQs", mode.name, srq)
			}
			if p.Peak.Resources["qp"] != 40 || p.Server.Resources["qp"] != 40 {
				t.Errorf("server fabric counts %v", p.Server.Resources)
			}
		})
	}
}
