package analysis

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func failedPoint(clients, connected int, class, errno, text string) result.Point {
	pt := result.Point{Clients: clients, Attempted: clients, Connected: connected,
		Outcomes: map[string]int{result.OutcomeOK: connected, class: clients - connected},
		Errors:   map[string]int{text: clients - connected}}
	for i := 0; i < clients-connected; i++ {
		pt.Records = append(pt.Records, result.ClientRecord{ID: i, Outcome: class, Errno: errno, Error: text})
	}
	return pt
}

func withMaps(pt result.Point, role string, maps int) result.Point {
	pt.Samples = []result.Sample{{Procs: []result.ProcSample{{Role: role, Maps: maps}}}}
	// What the sampler's peak of these samples holds (collectors.Peaks).
	pt.Peak = &result.Peak{}
	if role == "server" {
		pt.Peak.ServerMaps = maps
	}
	return pt
}

// Each limit, set up as the evidence a real run records, is named with
// that evidence; the other limits in force, far from their bounds, are
// not blamed.
func TestDiagnose(t *testing.T) {
	lim := result.Limits{NoFile: 1 << 20, MaxMapCount: 65530, Somaxconn: 4096,
		DeviceCaps: map[string]int64{"max_qp": 450, "max_cq": 1 << 20, "max_mr": 1 << 19, "max_pd": 1 << 20, "max_srq": 2}}
	after := lim
	cases := []struct {
		name     string
		pt       result.Point
		before   result.Limits
		after    result.Limits
		max      int
		limit    string
		summary  []string
		evidence string
		// suggestion, if set, is what the advice must mention.
		suggestion string
	}{
		{name: "max-clients", pt: func() result.Point {
			p := failedPoint(40, 30, result.OutcomeRefused, "", "server at capacity (30 clients)")
			p.Server.Refused = 10
			return p
		}(), before: lim, after: after, max: 30, limit: "max-clients",
			summary: []string{"refused 10 clients", "--max-clients 30"}},
		{name: "server map guard", pt: withMaps(failedPoint(300, 164, result.OutcomeQPCreate, "ENOMEM",
			"server: qp-create: ibv_create_qp: ENOMEM (cannot allocate memory): not attempted: the server holds 667 of vm.max_map_count 1000 mappings, 630 more are being created, and it leaves the last 20 to the Go runtime"),
			"server", 700), before: result.Limits{MaxMapCount: 1000}, after: result.Limits{MaxMapCount: 1000}, max: 300,
			limit: "vm.max_map_count", summary: []string{"136 clients failed (ibv_create_qp: ENOMEM), 164 of 300 connected", "667 mappings of vm.max_map_count 1,000", "630 more being created"},
			suggestion: "--mode srq"},
		{name: "sim device cap", pt: func() result.Point {
			p := failedPoint(451, 450, result.OutcomeQPCreate, "EINVAL", "server: qp-create: ibv_create_qp: EINVAL (invalid argument): max_qp 450 reached")
			p.Server.Resources = map[string]int{"qp": 450, "cq": 900}
			return p
		}(), before: lim, after: after, max: 451, limit: "device-cap:max_qp",
			summary:    []string{"1 client failed (ibv_create_qp: EINVAL), 450 of 451 connected", "450 QPs of max_qp 450"},
			suggestion: "every resource mode but mux uses 1 QP per client"},
		{name: "sim SRQ cap", pt: func() result.Point {
			p := failedPoint(30, 20, result.OutcomeQPCreate, "EINVAL", "server: qp-create: shared receive queue: ibv_create_srq: EINVAL (invalid argument): max_srq 2 reached")
			p.Server.Resources = map[string]int{"qp": 20, "cq": 4, "srq": 2}
			return p
		}(), before: lim, after: after, max: 30, limit: "device-cap:max_srq",
			summary:    []string{"10 clients failed (ibv_create_srq: EINVAL), 20 of 30 connected", "2 SRQs of max_srq 2"},
			suggestion: "--mode pool"},
		// rxe's max_ah with the clients on the server's device: the
		// kernel counts no AHs, so the connected clients tell.
		{name: "ud: max_ah shared by both ends", pt: failedPoint(20000, 16383, result.OutcomeQPCreate, "EINVAL",
			"server: qp-create: ibv_create_ah: EINVAL (invalid argument)"),
			before: result.Limits{NoFile: 1 << 20, MaxMapCount: 65530, DeviceCaps: map[string]int64{"max_ah": 32767}},
			max:    20000, limit: "device-cap:max_ah",
			summary:    []string{"3,617 clients failed (ibv_create_ah: EINVAL), 16,383 of 20,000 connected", "16,383 clients hold 32,766 AHs", "max_ah 32,767"},
			suggestion: "--vm-peer"},
		{name: "device cap from the kernel's count", pt: func() result.Point {
			p := failedPoint(451, 450, result.OutcomeQPCreate, "EINVAL", "ibv_create_qp: EINVAL")
			p.Peak = &result.Peak{RDMA: map[string]int{"qp": 449}, Baseline: map[string]int{"qp": 1}}
			return p
		}(), before: lim, after: after, max: 451, limit: "device-cap:max_qp",
			summary: []string{"the device held 450 QPs"}},
		{name: "vm.max_map_count", pt: withMaps(failedPoint(20000, 16371, result.OutcomeQPCreate, "ENOMEM",
			"server: qp-create: ibv_create_cq: ENOMEM (cannot allocate memory)"), "server", 65524),
			before: lim, after: after, max: 20000, limit: "vm.max_map_count",
			summary:    []string{"3,629 clients failed (ibv_create_cq: ENOMEM), 16,371 of 20,000 connected", "server process had 65,524 mappings of vm.max_map_count 65,530"},
			suggestion: "--mode srq 1"},
		{name: "max_map_count in a load generator", pt: withMaps(failedPoint(300, 200, result.OutcomeQPCreate, "ENOMEM",
			"ibv_create_qp: ENOMEM"), "clients-0", 999),
			before: result.Limits{NoFile: 1 << 20, MaxMapCount: 1000}, max: 300, limit: "vm.max_map_count",
			summary: []string{"load-generator clients-0 process had 999 mappings"}},
		{name: "rlimit-nofile", pt: func() result.Point {
			p := failedPoint(200, 40, result.OutcomeTimeout, "", "deadline during tls: i/o timeout")
			p.Server.Errors = map[string]int{"accept tcp 127.0.0.1:4000: accept4: too many open files": 77}
			p.Peak = &result.Peak{ServerFDs: 63}
			return p
		}(), before: result.Limits{NoFile: 64, MaxMapCount: 65530}, max: 200, limit: "rlimit-nofile",
			summary: []string{"63 open files of RLIMIT_NOFILE 64"}, evidence: "accept failed 77 times",
			suggestion: "or run the server with --detach"},
		{name: "listen backlog", pt: failedPoint(500, 420, result.OutcomeTimeout, "", "deadline during tcp-connect: i/o timeout"),
			before: result.Limits{NoFile: 1 << 20, Somaxconn: 4096, ListenOverflows: 10},
			after:  result.Limits{NoFile: 1 << 20, Somaxconn: 4096, ListenOverflows: 135, ListenDrops: 135}, max: 500,
			limit: "listen-backlog", summary: []string{"80 clients failed (timeout), 420 of 500 connected", "overflowed 125 times (somaxconn 4,096)"},
			evidence: "tcp_listen_overflows rose 10 → 135 (+125) during the point"},
		{name: "plain timeout", pt: failedPoint(100, 90, result.OutcomeTimeout, "", "deadline during rtr"),
			before: lim, after: after, max: 100, limit: "timeout", summary: []string{"10 clients hit their deadline"}},
		{name: "unknown", pt: failedPoint(100, 99, result.OutcomeMessage, "", "payload checksum mismatch"),
			before: lim, after: after, max: 100, limit: "unknown", summary: []string{"no limit in force was near its bound"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Diagnose(c.pt, c.before, c.after, c.max)
			if d == nil {
				t.Fatal("no diagnosis")
			}
			if d.Limit != c.limit {
				t.Errorf("limit %q, want %q (%s)", d.Limit, c.limit, d.Summary)
			}
			for _, s := range c.summary {
				if !strings.Contains(d.Summary, s) {
					t.Errorf("summary %q lacks %q", d.Summary, s)
				}
			}
			if c.evidence != "" && !strings.Contains(strings.Join(d.Evidence, "\n"), c.evidence) {
				t.Errorf("evidence %q lacks %q", d.Evidence, c.evidence)
			}
			if d.Suggestion == "" {
				t.Error("no suggestion")
			}
			if !strings.Contains(d.Suggestion, c.suggestion) {
				t.Errorf("suggestion %q lacks %q", d.Suggestion, c.suggestion)
			}
		})
	}
	ok := result.Point{Clients: 10, Attempted: 10, Connected: 10, Outcomes: map[string]int{result.OutcomeOK: 10}}
	if d := Diagnose(ok, lim, lim, 10); d != nil {
		t.Errorf("a clean point diagnosed: %+v", d)
	}
}

func TestCost(t *testing.T) {
	pt := result.Point{Connected: 64,
		Samples: []result.Sample{{Procs: []result.ProcSample{{Role: "server", RSS: 10 << 20}}}},
		Peak: &result.Peak{ServerRSS: 10<<20 + 64*8192, RDMA: map[string]int{"qp": 128},
			ByRole: map[string]map[string]int{"server": {"qp": 64, "cq": 128, "mr": 128, "pd": 1, "mr_bytes": 128 * 4096}}}}
	c := Cost(pt)
	if c.QPs != 1 || c.CQs != 2 || c.MRs != 2 || c.RegisteredMem != 8192 || c.ServerRSS != 8192 {
		t.Errorf("cost %+v", c)
	}
	if Cost(result.Point{}) != nil {
		t.Error("cost of a point without clients")
	}
	// ud on rxe: the kernel counts no AHs, the server's own count stands in.
	pt.Server.PeakAHs = 64
	if c := Cost(pt); c.AHs != 1 {
		t.Errorf("ud cost %+v, want 1 AH per client from the server's count", c)
	}
}

func TestNum(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 16371: "16,371", -65530: "-65,530", 1234567: "1,234,567"} {
		if got := Thousands(n); got != want {
			t.Errorf("num(%d) = %q", n, got)
		}
	}
}

// A wall of the generators' hosts is named as theirs, with the hosts
// that hit it and their limit, not the server's.
func TestDiagnoseGeneratorPorts(t *testing.T) {
	pt := result.Point{Clients: 120, Attempted: 120, Connected: 49,
		Outcomes: map[string]int{result.OutcomeOK: 49, result.OutcomeTCPConnect: 71},
		Hosts: []result.HostPoint{
			{Host: "h1", Generators: []int{0}, Attempted: 100, Connected: 29,
				Usage: []result.GeneratorUsage{{Generator: 0, Limits: map[string]string{"net.ipv4.ip_local_port_range": "40000 40049"}}}},
			{Host: "h2", Generators: []int{1}, Attempted: 20, Connected: 20}}}
	for i := 0; i < 71; i++ {
		pt.Records = append(pt.Records, result.ClientRecord{ID: i, Proc: 0, Outcome: result.OutcomeTCPConnect,
			Errno: "EADDRNOTAVAIL", Error: "tcp connect: connect: cannot assign requested address"})
	}
	d := Diagnose(pt, result.Limits{NoFile: 1 << 20}, result.Limits{}, 120)
	if d == nil || d.Limit != "generator:ephemeral-ports" || !strings.Contains(d.Summary, "not the server's: h1 ran out of ephemeral ports") {
		t.Fatalf("diagnosis %+v", d)
	}
	ev := strings.Join(d.Evidence, "\n")
	for _, want := range []string{"h1: 71 clients failed with EADDRNOTAVAIL; net.ipv4.ip_local_port_range 40000 40049", "h2: 20 of 20 connected"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
}

// A client command that prints its server's EMFILE (the compiled-cap
// fixture relays "server error: accept: Too many open files") is not a
// wall of the generators' hosts: the errno came from the other side.
func TestDiagnoseRelayedEMFILEIsNotTheGenerators(t *testing.T) {
	pt := result.Point{Clients: 6, Attempted: 6, Connected: 5,
		Outcomes: map[string]int{result.OutcomeOK: 5, result.OutcomeExit: 1},
		Records: []result.ClientRecord{{ID: 5, Outcome: result.OutcomeExit, Errno: "EMFILE",
			Error: "exit status 4: capclient: server error: accept: Too many open files (EMFILE)"}}}
	d := Diagnose(pt, result.Limits{NoFile: 1 << 20}, result.Limits{}, 6)
	if d != nil && strings.HasPrefix(d.Limit, "generator:") {
		t.Fatalf("diagnosis %+v", d)
	}
}

// An external client that exits 1 when its connect times out fails as
// exit, opaque to the harness: the listen queue's overflow counter, which
// rose during the point, still names the wall (issue 49: the seed
// project's server, listen(fd, 10), at 300 clients in the guest).
func TestDiagnoseListenQueueBehindExit(t *testing.T) {
	pt := result.Point{Clients: 300, Attempted: 300, Connected: 174,
		Outcomes: map[string]int{result.OutcomeOK: 174, result.OutcomeExit: 90, result.OutcomeTimeout: 36},
		Target:   &result.TargetPoint{}}
	for i := 0; i < 90; i++ {
		pt.Records = append(pt.Records, result.ClientRecord{ID: i, Outcome: result.OutcomeExit, Errno: "ETIMEDOUT",
			Error: "exit status 1: connect: Connection timed out"})
	}
	for i := 90; i < 126; i++ {
		pt.Records = append(pt.Records, result.ClientRecord{ID: i, Outcome: result.OutcomeTimeout, Error: "killed at the deadline"})
	}
	before := result.Limits{NoFile: 1 << 20, Somaxconn: 4096, ListenOverflows: 484, ListenDrops: 484}
	after := before
	after.ListenOverflows, after.ListenDrops = 2393, 2393
	d := Diagnose(pt, before, after, 300)
	if d == nil || d.Limit != "listen-backlog" {
		t.Fatalf("diagnosis %+v, want listen-backlog", d)
	}
	for _, want := range []string{"90 clients failed (exit: ETIMEDOUT), 174 of 300 connected", "the listen queue overflowed 1,909 times"} {
		if !strings.Contains(d.Summary, want) {
			t.Errorf("summary %q lacks %q", d.Summary, want)
		}
	}
	ev := strings.Join(d.Evidence, "\n")
	for _, want := range []string{"tcp_listen_overflows rose 484 → 2,393 (+1,909) during the point", "tcp_listen_drops rose 484 → 2,393 (+1,909) during the point"} {
		if !strings.Contains(ev, want) {
			t.Errorf("evidence lacks %q:\n%s", want, ev)
		}
	}
	if !strings.Contains(d.Suggestion, "server command's own listen() backlog") {
		t.Errorf("suggestion %q", d.Suggestion)
	}
}

// The summary's count is the clients that failed as it says, beside how
// many connected: one client's exit at 100 reads "1 client failed", not
// "from 99 clients".
func TestDiagnoseCountsWhatFailed(t *testing.T) {
	pt := failedPoint(100, 99, result.OutcomeExit, "", "exit status 1")
	d := Diagnose(pt, result.Limits{NoFile: 1 << 20}, result.Limits{NoFile: 1 << 20}, 100)
	if d == nil || d.Limit != "unknown" || !strings.HasPrefix(d.Summary, "1 client failed (exit), 99 of 100 connected;") {
		t.Fatalf("diagnosis %+v", d)
	}
	// An errno most of the class's clients but not all had says how
	// many had it.
	pt = failedPoint(10, 4, result.OutcomeExit, "ECONNREFUSED", "exit status 6: connect: Connection refused")
	pt.Records[0].Errno = "EPIPE"
	d = Diagnose(pt, result.Limits{}, result.Limits{}, 10)
	if d == nil || !strings.HasPrefix(d.Summary, "6 clients failed (exit; 5 of them ECONNREFUSED), 4 of 10 connected") {
		t.Fatalf("diagnosis %+v", d)
	}
}

// A failure that names a verbs call got past the listen queue: a rise
// of its counters is evidence, not the diagnosis.
func TestDiagnoseListenQueueRiseIsEvidence(t *testing.T) {
	before := result.Limits{NoFile: 1 << 20, Somaxconn: 4096, ListenOverflows: 7}
	after := before
	after.ListenOverflows = 19
	for _, pt := range []result.Point{
		failedPoint(100, 60, result.OutcomeExit, "ENOMEM", "exit status 5: capclient: ibv_create_qp: Cannot allocate memory (ENOMEM)"),
		failedPoint(100, 99, result.OutcomeMessage, "", "payload checksum mismatch"),
	} {
		d := Diagnose(pt, before, after, 100)
		if d == nil || d.Limit == "listen-backlog" {
			t.Fatalf("%v: diagnosis %+v", pt.Outcomes, d)
		}
		if ev := strings.Join(d.Evidence, "\n"); !strings.Contains(ev, "tcp_listen_overflows rose 7 → 19 (+12) during the point") {
			t.Errorf("%v: evidence lacks the counter's rise:\n%s", pt.Outcomes, ev)
		}
	}
}
