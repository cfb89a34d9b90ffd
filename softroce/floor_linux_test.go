package softroce

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
)

// BenchmarkEchoFloor measures the floor under rdmaprobe's 1-client
// latency target (an echo's p50 <= 2 x ib_send_lat's t_typical, same
// guest, same size): in one guest, b.N rounds of perftest's ib_send_lat
// and then testdata/echofloor's C echo, bare and verified, each 20,000
// round trips at ECHOFLOOR_SIZE bytes (default 4096). echofloor is the
// echo of rdmaprobe's traffic phase with nothing of rdmaprobe around it
// (see its header), so its ratios are what no harness doing that echo
// can go below on this machine. Figures, not a pass/fail: `make floor`
// runs FLOOR_ROUNDS (7) rounds and results/*-floor keep what they printed;
// TestEchoFloor keeps the C echo itself working.
func BenchmarkEchoFloor(b *testing.B) {
	size := 4096
	if s := os.Getenv("ECHOFLOOR_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 12 {
			b.Fatalf("ECHOFLOOR_SIZE=%q: want a number of bytes >= 12", s)
		}
		size = n
	}
	const roundTrips = "20000"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	g, bin := echoFloorGuest(b, ctx)
	defer g.Close()
	// The rdmaprobe binary, when given, runs its own 1-client echo as
	// the round's fourth reading (`make floor` gives bin/rdmaprobe).
	rp := os.Getenv("RDMAPROBE_BIN")
	if rp != "" {
		abs, err := filepath.Abs(rp)
		var files []File
		if err == nil {
			files, err = HostFiles([]string{abs})
		}
		if err == nil {
			_, err = g.PutFiles(ctx, files)
		}
		if err != nil {
			b.Fatalf("RDMAPROBE_BIN into the guest: %v", err)
		}
		rp = abs
	}

	var bare, verified, own []float64
	for round := 1; b.Loop(); round++ {
		pt := perftest(ctx, Local(g), "ib_send_lat", referencePort+2, "-s", strconv.Itoa(size), "-n", roundTrips)
		typ := pt.Figures["t_typical"]
		if pt.Err != nil || typ <= 0 {
			b.Fatalf("%s: %v\n%s", pt.Command, pt.Err, pt.Output)
		}
		pb := echoFloor(b, ctx, g, bin, "bare", size, roundTrips)
		pv := echoFloor(b, ctx, g, bin, "verified", size, roundTrips)
		line := fmt.Sprintf("round %d, %d B: ib_send_lat t_typical %.2f us; echo p50 bare %.2f us (%.2fx), verified %.2f us (%.2fx)",
			round, size, typ, pb, pb/typ, pv, pv/typ)
		bare = append(bare, pb/typ)
		verified = append(verified, pv/typ)
		if rp != "" {
			po := ownEcho(b, ctx, g, rp, size)
			line += fmt.Sprintf(", rdmaprobe %.2f us (%.2fx)", po, po/typ)
			own = append(own, po/typ)
		}
		b.Log(line)
	}
	b.ReportMetric(analysis.Percentiles(bare).P50, "bare/t_typical")
	b.ReportMetric(analysis.Percentiles(verified).P50, "verified/t_typical")
	if len(own) > 0 {
		b.ReportMetric(analysis.Percentiles(own).P50, "rdmaprobe/t_typical")
	}
}

var ownP50 = regexp.MustCompile(`traffic: .* latency p50 ([0-9.]+)(us|ms)`)

// ownEcho runs rdmaprobe's 1-client point (server and load generator on
// rxe0, busy-polled as the README's in-turns runs) for 3 s and returns
// its echo p50 in µs.
func ownEcho(b *testing.B, ctx context.Context, g *Guest, rp string, size int) float64 {
	b.Helper()
	r, err := g.Exec(ctx, 5*time.Minute, rp, "ramp", "--backend", "verbs", "--clients", "1", "--traffic", "3s",
		"--busy-poll", "2ms", "--msg-size", strconv.Itoa(size), "--sample-interval", "0", "--calibrate", "0",
		"--results", "/tmp/echofloor-results")
	if err != nil || r.ExitCode != 0 {
		b.Fatalf("rdmaprobe: %v (exit %d %s)\n%s%s", err, r.ExitCode, r.Error, r.Stdout, r.Stderr)
	}
	m := ownP50.FindStringSubmatch(r.Stdout + r.Stderr)
	if m == nil {
		b.Fatalf("rdmaprobe printed no traffic p50:\n%s%s", r.Stdout, r.Stderr)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	if m[2] == "ms" {
		v *= 1000
	}
	return v
}

// echoFloorGuest builds echofloor on the host and boots a guest that has
// it (and perftest).
func echoFloorGuest(tb testing.TB, ctx context.Context) (*Guest, string) {
	tb.Helper()
	if ok, why := Available(); !ok {
		tb.Skipf("vm backend unavailable: %s", why)
	}
	bin := buildEchoFloor(tb, ctx)
	g := bootGuest(tb, ctx, false, DefaultExtraBinaries)
	if err := putEchoFloor(ctx, g, bin); err != nil {
		g.Close()
		tb.Fatal(err)
	}
	return g, bin
}

// buildEchoFloor builds echofloor on the host.
func buildEchoFloor(tb testing.TB, ctx context.Context) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "echofloor")
	cc := exec.CommandContext(ctx, "gcc", "-O2", "-Wall", "-Werror", "-I../fabric/verbs", "-o", bin,
		"testdata/echofloor/echofloor.c", "-libverbs", "-lpthread")
	if out, err := cc.CombinedOutput(); err != nil {
		tb.Fatalf("building echofloor: %v\n%s", err, out)
	}
	return bin
}

// putEchoFloor copies bin into g, at its path there: after boot, since
// the guest's /tmp is its own tmpfs.
func putEchoFloor(ctx context.Context, g *Guest, bin string) error {
	files, err := HostFiles([]string{bin})
	if err == nil {
		_, err = g.PutFiles(ctx, files)
	}
	if err != nil {
		return fmt.Errorf("echofloor into the guest: %w", err)
	}
	return nil
}

// TestEchoFloor keeps `make floor`'s C echo working: on rxe0, bare and
// verified, at 4 KiB and at the smallest size the payload allows, it
// completes its round trips and prints a p50; a wrong mode is refused.
func TestEchoFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g := sharedGuest(t)
	bin := buildEchoFloor(t, ctx)
	if err := putEchoFloor(ctx, g, bin); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{4096, 12} {
		for _, mode := range []string{"bare", "verified"} {
			p50 := echoFloor(t, ctx, g, bin, mode, size, "2000")
			if p50 <= 0 || p50 > 100_000 {
				t.Errorf("echofloor %s %d B: p50 %v us", mode, size, p50)
			}
		}
	}
	r, err := floorExec(ctx, g, time.Minute, bin, "both", "4096", "10")
	if err != nil || r.ExitCode == 0 || !strings.Contains(r.Stderr, "usage") {
		t.Errorf("echofloor both: %v, exit %d, stderr %q; want a usage error", err, r.ExitCode, r.Stderr)
	}
}

var floorP50 = regexp.MustCompile(`p50_us=([0-9.]+)`)

// echoFloor runs echofloor mode in the guest and returns its p50 in µs.
func echoFloor(tb testing.TB, ctx context.Context, g *Guest, bin, mode string, size int, n string) float64 {
	tb.Helper()
	r, err := floorExec(ctx, g, 5*time.Minute, bin, mode, strconv.Itoa(size), n)
	if err != nil || r.ExitCode != 0 {
		tb.Fatalf("echofloor %s: %v (exit %d %s)\n%s%s", mode, err, r.ExitCode, r.Error, r.Stdout, r.Stderr)
	}
	m := floorP50.FindStringSubmatch(r.Stdout)
	if m == nil {
		tb.Fatalf("echofloor %s printed no p50: %q", mode, r.Stdout)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		tb.Fatalf("echofloor %s: %v", mode, err)
	}
	return v
}

// floorExec runs echofloor in g seeing rxe0 alone: it opens the first
// device it is shown, and the shared guest has the netdev one too.
func floorExec(ctx context.Context, g *Guest, timeout time.Duration, argv ...string) (ExecResult, error) {
	var r ExecResult
	raw, err := g.Call(ctx, OpExec, ExecRequest{Argv: argv, TimeoutMS: timeout.Milliseconds(), OnlyDevice: rxeDevice}, nil)
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	return r, err
}
