package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// fake writes a shell script standing in for rdmaprobe: it dispatches on
// the subcommand so each test can script a server and generators. A
// generator reads its spec line first and has $n, $base and $proc from
// it.
func fake(t *testing.T, serve, clients string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-rdmaprobe")
	script := "#!/bin/bash\n" + specField + "case \"$1\" in\nserve)\n" + serve + "\n;;\nclients)\n" +
		"read -r spec; n=$(field n); base=$(field id_base); proc=$(field proc)\n" + clients + "\n;;\nesac\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// specField prints a whole-number field of the spec line in $spec.
const specField = `field() { [[ $spec =~ \"$1\":(-?[0-9]+) ]] && echo "${BASH_REMATCH[1]}"; }
`

// Says ready, answers usage requests (its CPU and polling grow by 1 and
// 0.75 s each time it is asked), and its stats on SIGTERM.
const goodServer = `echo '{"event":"ready","addr":"127.0.0.1:1","device":{"name":"fake0"}}'
trap 'echo "{\"event\":\"stats\",\"server\":{\"accepted\":2,\"connected\":2,\"peak_active\":2}}"; exit 0' TERM
asked=0
while true; do
  if read -t 1 line && [ "$line" = usage ]; then
    asked=$((asked+1))
    echo "{\"event\":\"usage\",\"server_usage\":{\"cpu_sec\":$asked,\"spin_sec\":$((asked*75))e-2}}"
  fi
done`

// Says ready, then reads the server's address from stdin.
const goodClients = `echo '{"event":"ready"}'
read -r addr || exit 0
[ "$addr" = "127.0.0.1:1" ] || { echo "{\"event\":\"error\",\"error\":\"released with address '$addr'\"}"; exit 1; }
recs=""
for ((i=0;i<n;i++)); do
  [ -n "$recs" ] && recs="$recs,"
  recs="$recs{\"id\":$((base+i)),\"outcome\":\"ok\",\"connect_us\":1500,\"phases_us\":{\"tls\":900},\"rtts_us\":[20],\"local_psn\":$((base+i)),\"remote_psn\":7}"
done
echo "{\"event\":\"done\",\"ok\":$n,\"records\":[$recs]}"
cat >/dev/null`

// newRunner runs points with the fake exe; set changes the spec.
func newRunner(t *testing.T, exe string, procs int, set ...func(*Spec)) *Local {
	t.Helper()
	spec := Spec{Procs: procs, Threshold: 1, Timeout: 5 * time.Second,
		StartTimeout: 5 * time.Second, CalibrationWindow: -1}
	for _, f := range set {
		f(&spec)
	}
	r, err := NewLocal(spec, LocalOptions{Exe: exe})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRunPointCollects(t *testing.T) {
	r := newRunner(t, fake(t, goodServer, goodClients), 2)
	pt, err := r.RunPoint(context.Background(), 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Attempted != 5 || pt.Connected != 5 || !pt.Passed || pt.SuccessRate != 1 {
		t.Errorf("point %+v", pt)
	}
	for i, rec := range pt.Records {
		if rec.ID != i {
			t.Errorf("record %d has ID %d: IDs must cover 0..n-1 across generators", i, rec.ID)
		}
	}
	if pt.Server.PeakActive != 2 || pt.Error != "" {
		t.Errorf("server stats %+v, error %q", pt.Server, pt.Error)
	}
	if pt.Connect.P50 != 1.5 || pt.Phases[result.PhaseTLS].P50 != 0.9 {
		t.Errorf("connect %+v tls %+v", pt.Connect, pt.Phases[result.PhaseTLS])
	}
	if r.Device() == nil || r.Device().Name != "fake0" {
		t.Errorf("device %+v", r.Device())
	}
	if pt.StartupSec <= 0 || pt.ConnectSec <= 0 {
		t.Errorf("startup %.3f s, connect %.3f s: want both timed", pt.StartupSec, pt.ConnectSec)
	}
	// The kernel's memory, before, with the clients held and after.
	if k := pt.KernelMemory; runtime.GOOS == "linux" && (k == nil || k.Before["MemTotal"] == 0 || k.Loaded["MemAvailable"] == 0 || k.After["Slab"] == 0) {
		t.Errorf("kernel memory %+v", k)
	}
}

// The generators start while the server does, and the connect clock
// starts only when both are ready: a server that takes a second to start
// shows in StartupSec, not in ConnectSec.
func TestStartupIsNotConnectTime(t *testing.T) {
	slow := "sleep 1\n" + goodServer
	r := newRunner(t, fake(t, slow, goodClients), 2)
	pt, err := r.RunPoint(context.Background(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Connected != 4 || pt.Error != "" {
		t.Fatalf("point %+v", pt)
	}
	if pt.StartupSec < 1 || pt.ConnectSec >= 1 {
		t.Errorf("startup %.3f s, connect %.3f s: want the server's 1 s start-up in startup only", pt.StartupSec, pt.ConnectSec)
	}
}

// A generator that never says ready holds the others back only until the
// point's deadline, and is named as not ready.
func TestGeneratorNeverReady(t *testing.T) {
	stuck := `if [ "$proc" = 1 ]; then exec sleep 600; fi
` + goodClients
	r := newRunner(t, fake(t, goodServer, stuck), 2, func(s *Spec) { s.Timeout = 1 * time.Second })
	pt, err := r.RunPoint(context.Background(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Connected != 2 || !strings.Contains(pt.Error, "load generator 1 hung: not ready") {
		t.Errorf("connected %d, error %q; want generator 0's 2 clients and generator 1 named; %+v", pt.Connected, pt.Error, pt.Records)
	}
}

func TestGeneratorCrashIsRecorded(t *testing.T) {
	crash := `echo 'boom: out of memory' >&2; exit 3`
	r := newRunner(t, fake(t, goodServer, crash), 1)
	pt, err := r.RunPoint(context.Background(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Attempted != 4 || pt.Connected != 0 || pt.Passed {
		t.Errorf("point %+v", pt)
	}
	if !strings.Contains(pt.Error, "exit status 3") || !strings.Contains(pt.Error, "boom: out of memory") {
		t.Errorf("point error %q should carry the exit status and stderr", pt.Error)
	}
	if pt.Outcomes[result.OutcomeTimeout] != 4 {
		t.Errorf("outcomes %v", pt.Outcomes)
	}
}

func TestServerNeverReady(t *testing.T) {
	r := newRunner(t, fake(t, `echo 'cannot open device' >&2; exit 1`, goodClients), 1)
	_, err := r.RunPoint(context.Background(), 1, 0)
	if err == nil || !strings.Contains(err.Error(), "cannot open device") {
		t.Fatalf("error %v should carry the server's stderr", err)
	}
}

func TestServerDiesMidPoint(t *testing.T) {
	// The server exits right after announcing readiness; the generator
	// still reports (its clients failed), and the point says why.
	dying := `echo '{"event":"ready","addr":"127.0.0.1:1"}'; exit 9`
	slow := `read -t 1; ` + goodClients
	r := newRunner(t, fake(t, dying, slow), 1)
	pt, err := r.RunPoint(context.Background(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pt.Error, "server died during the point") || !strings.Contains(pt.Error, "exit status 9") {
		t.Errorf("point error %q", pt.Error)
	}
}

func TestInterruptKillsChildren(t *testing.T) {
	hang := `exec sleep 600`
	// The generator ignores its stdin closing: if it started before the
	// cancel, it is killed once the grace is over (45 s in use, which
	// the wait below would not outlast).
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = 2 * time.Second
	r := newRunner(t, fake(t, goodServer, hang), 1)
	ctx, cancel := context.WithCancel(context.Background())
	r.opts.Progress = nil
	done := make(chan struct{})
	var pt result.Point
	var err error
	go func() {
		pt, err = r.RunPoint(ctx, 3, 0)
		close(done)
	}()
	// Cancel once the generator runs: the point must end promptly.
	cancel()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("RunPoint did not return after cancel")
	}
	if err == nil {
		t.Errorf("want context error, point %+v", pt)
	}
}

func TestShare(t *testing.T) {
	total := 0
	for i := 0; i < 3; i++ {
		total += share(10, 3, i)
	}
	if total != 10 || share(10, 3, 0) != 4 || share(10, 3, 2) != 3 {
		t.Errorf("share splits 10 over 3 as %d,%d,%d", share(10, 3, 0), share(10, 3, 1), share(10, 3, 2))
	}
}

func TestSplitCPUs(t *testing.T) {
	tests := []struct {
		policy          string
		cpus, procs     int
		server, clients int
	}{
		{GoMaxProcsSplit, 2, 1, 1, 1},
		{GoMaxProcsSplit, 2, 4, 1, 1}, // never below one
		{GoMaxProcsSplit, 1, 1, 1, 1},
		{GoMaxProcsSplit, 16, 4, 8, 2},
		{GoMaxProcsSplit, 8, 3, 4, 1},
		{"", 4, 1, 2, 2}, // split is the default
		{GoMaxProcsAll, 16, 4, 0, 0},
	}
	for _, tc := range tests {
		s, c := splitCPUs(tc.policy, tc.cpus, tc.procs)
		if s != tc.server || c != tc.clients {
			t.Errorf("splitCPUs(%q, %d cpus, %d procs) = %d, %d; want %d, %d", tc.policy, tc.cpus, tc.procs, s, c, tc.server, tc.clients)
		}
	}
}

// The children see the GOMAXPROCS the policy gives them.
func TestChildrenGetGOMAXPROCS(t *testing.T) {
	for _, policy := range []string{GoMaxProcsSplit, GoMaxProcsAll} {
		dir := t.TempDir()
		srv := `echo "${GOMAXPROCS:-unset}" > ` + dir + "/server\n" + goodServer
		cl := `echo "${GOMAXPROCS:-unset}" > ` + dir + "/clients-$proc\n" + goodClients
		r := newRunner(t, fake(t, srv, cl), 2, func(s *Spec) { s.GoMaxProcs = policy })
		if _, err := r.RunPoint(context.Background(), 4, 0); err != nil {
			t.Fatal(err)
		}
		ws, wc := splitCPUs(policy, runtime.NumCPU(), 2)
		for name, want := range map[string]int{"server": ws, "clients-0": wc, "clients-1": wc} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			got, wantS := strings.TrimSpace(string(b)), "unset"
			if v := os.Getenv("GOMAXPROCS"); v != "" {
				wantS = v // "all" leaves the inherited environment alone
			}
			if want > 0 {
				wantS = strconv.Itoa(want)
			}
			if got != wantS {
				t.Errorf("%s: %s saw GOMAXPROCS=%s, want %s", policy, name, got, wantS)
			}
		}
	}
}

// Each child gets its whole configuration as one JSON line on stdin:
// the server its cap, mode and the run's pair; each generator its share
// of the clients and the server certificate to pin.
func TestChildrenGetTheirSpec(t *testing.T) {
	dir := t.TempDir()
	srv := `read -r spec; echo "$spec" > ` + dir + "/server\n" + goodServer
	cl := `echo "$spec" > ` + dir + "/clients-$proc\n" + goodClients
	p := pairs(t)
	r, err := NewLocal(Spec{Procs: 2, Threshold: 1, Timeout: 5 * time.Second, StartTimeout: 5 * time.Second,
		MaxClients: 9, Mode: "srq", Rate: 100, CalibrationWindow: -1, Fabric: protocol.Fabric{Backend: "sim", SimMaxQP: 7}},
		LocalOptions{Exe: fake(t, srv, cl), Certs: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunPoint(context.Background(), 5, 0); err != nil {
		t.Fatal(err)
	}
	var ss protocol.ServerSpec
	readJSON(t, filepath.Join(dir, "server"), &ss)
	if ss.MaxClients != 9 || ss.Mode != "srq" || ss.Fabric.SimMaxQP != 7 || string(ss.Cert) != string(p.Server.CertPEM) ||
		string(ss.ClientCA) != string(p.Client.CertPEM) || ss.HandshakeTimeout != 5*time.Second {
		t.Errorf("server spec %+v", ss)
	}
	for i, want := range []protocol.GeneratorSpec{{N: 3, IDBase: 0, Proc: 0}, {N: 2, IDBase: 3, Proc: 1}} {
		var gs protocol.GeneratorSpec
		readJSON(t, filepath.Join(dir, "clients-"+strconv.Itoa(i)), &gs)
		if gs.N != want.N || gs.IDBase != want.IDBase || gs.Proc != want.Proc || gs.Rate != 50 ||
			string(gs.CA) != string(p.Server.CertPEM) || string(gs.Key) != string(p.Client.KeyPEM) || gs.Fabric.SimMaxQP != 0 {
			t.Errorf("generator %d spec %+v", i, gs)
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// A login shell's greeting on stdout before the first event (a remote
// .bashrc that echoes) is not taken for the protocol; output that is not
// an event after it is an error.
func TestChildOutputBeforeEvents(t *testing.T) {
	r := newRunner(t, fake(t, goodServer, "echo 'Welcome to the lab!'\necho\n"+goodClients), 2)
	pt, err := r.RunPoint(context.Background(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Connected != 4 || pt.Error != "" {
		t.Errorf("connected %d, error %q: a greeting before the events broke the point", pt.Connected, pt.Error)
	}
	bad := `echo '{"event":"ready"}'; read -r addr; echo 'not an event'; exit 1`
	r = newRunner(t, fake(t, goodServer, bad), 1)
	pt, err = r.RunPoint(context.Background(), 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pt.Error, "wrote unreadable output") {
		t.Errorf("point error %q, want the unreadable output named", pt.Error)
	}
}

// referencer is a launcher that records what the runner asks of it.
type referencer struct {
	localLauncher
	asked []string
}

func (r *referencer) DataPathReference(_ context.Context, f protocol.Fabric, op string, size int, serverIP string, _ io.Writer) []result.Reference {
	r.asked = append(r.asked, fmt.Sprintf("%s gid %d %s %d %s", f.Device, f.GIDIndex, op, size, serverIP))
	return []result.Reference{{Tool: "ib_write_bw", Where: "server host a ↔ generator host b"}}
}

// noHosts is a server host that describes no host.
type noHosts struct{ RemoteLauncher }

func (noHosts) Hosts() []result.Host { return nil }

// TestLocalDataPathReference: a verbs run with a traffic phase asks its
// launcher for the reference once, with the generators' device and GID,
// the phase's operation and message size and the address the hosts
// dial; Describe records it. Without a traffic phase, on sim, with the
// server on another host or on loopback it asks nothing.
func TestLocalDataPathReference(t *testing.T) {
	base := Spec{Fabric: protocol.Fabric{Backend: "verbs", Device: "mlx5_0", GIDIndex: 3}, Listen: "10.0.0.1:0", MsgSize: 64}
	base.Traffic.Op, base.Traffic.Duration = "write", time.Second
	for _, tc := range []struct {
		name string
		mod  func(*Spec, *LocalOptions)
		want string
	}{
		{"verbs", func(*Spec, *LocalOptions) {}, "mlx5_0 gid 3 write 64 10.0.0.1"},
		{"no traffic", func(s *Spec, _ *LocalOptions) { s.Traffic.Duration = 0 }, ""},
		{"sim", func(s *Spec, _ *LocalOptions) { s.Fabric.Backend = "sim" }, ""},
		{"loopback", func(s *Spec, _ *LocalOptions) { s.Listen = "127.0.0.1:0" }, ""},
		{"server host", func(_ *Spec, o *LocalOptions) { o.ServerHost = noHosts{} }, ""},
	} {
		spec, opts := base, LocalOptions{}
		tc.mod(&spec, &opts)
		r := &referencer{}
		l := &Local{spec: spec, opts: opts, launcher: r}
		l.dataRef = l.dataPathReference(context.Background())
		if got := strings.Join(r.asked, "; "); got != tc.want {
			t.Errorf("%s: asked %q, want %q", tc.name, got, tc.want)
		}
		var run result.Run
		l.Describe(&run)
		if (len(run.Environment.DataPath) == 1) != (tc.want != "") {
			t.Errorf("%s: recorded %+v", tc.name, run.Environment.DataPath)
		}
	}
}

// A point records how its rdma_cm generators stepped: auto picks
// lockstep where the window holds a generator's clients and no rate
// paces them, and generators of different sizes may differ.
func TestCMStepsOfAPoint(t *testing.T) {
	auto := &protocol.CMClient{}
	for _, c := range []struct {
		spec Spec
		n    int
		want string
	}{
		{Spec{}, 100, ""},
		{Spec{CM: auto, Procs: 1, InFlight: 256}, 256, protocol.CMStepsLockstep},
		{Spec{CM: auto, Procs: 1, InFlight: 256}, 257, protocol.CMStepsInterleaved},
		{Spec{CM: auto, Procs: 2, InFlight: 256}, 513, "mixed"},
		{Spec{CM: auto, Procs: 1, InFlight: 256, Rate: 10}, 10, protocol.CMStepsInterleaved},
		{Spec{CM: &protocol.CMClient{Steps: protocol.CMStepsLockstep}, Procs: 1, InFlight: 8}, 100, protocol.CMStepsLockstep},
	} {
		if got := c.spec.cmSteps(c.n); got != c.want {
			t.Errorf("%d clients, %d procs, window %d, rate %g, steps %q: %q, want %q",
				c.n, c.spec.Procs, c.spec.InFlight, c.spec.Rate, stepsOf(c.spec.CM), got, c.want)
		}
	}
}

func stepsOf(c *protocol.CMClient) string {
	if c == nil {
		return "none"
	}
	return c.Steps
}
