package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/live"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// readEvents parses JSON lines; every line must be one event.
func readEvents(t *testing.T, r io.Reader) []live.Event {
	t.Helper()
	var evs []live.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev live.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON event line: %q: %v", sc.Text(), err)
		}
		if ev.Type == "" || ev.TS.IsZero() {
			t.Fatalf("event without type or ts: %q", sc.Text())
		}
		evs = append(evs, ev)
	}
	return evs
}

// rebuild is what a consumer of the stream knows of the run at its end.
func rebuild(t *testing.T, evs []live.Event) *result.Run {
	t.Helper()
	var run *result.Run
	for _, ev := range evs {
		switch ev.Type {
		case live.EventRunStart:
			run = ev.Run
		case live.EventPointEnd:
			if !ev.Point.Interrupted {
				run.Points = append(run.Points, *ev.Point)
			}
		case live.EventRunEnd:
			run.Search, run.Interrupted = ev.Search, ev.Interrupted
		}
	}
	if run == nil {
		t.Fatal("no run_start")
	}
	return run
}

// With --events -, stdout is JSON lines only, every kind of event is
// there, and the stream alone rebuilds the table printed on stderr.
func TestEventsRebuildTable(t *testing.T) {
	root := t.TempDir()
	stdout, stderr, code := run(t, "search", "--backend", "sim", "--lo", "4", "--hi", "12", "--sim-max-qp", "8",
		"--rounds", "1", "--msg-size", "64", "--traffic", "300ms", "--calibrate", "0", "--results", root, "--events", "-")
	if code != ExitMeasured {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	evs := readEvents(t, strings.NewReader(stdout))
	seen := map[string]int{}
	for _, ev := range evs {
		seen[ev.Type]++
	}
	for _, typ := range []string{live.EventRunStart, live.EventDecision, live.EventPointStart, live.EventPointEnd, live.EventRunEnd} {
		if seen[typ] == 0 {
			t.Errorf("no %s event in %v", typ, seen)
		}
	}
	if evs[0].Type != live.EventRunStart || evs[len(evs)-1].Type != live.EventRunEnd {
		t.Errorf("first %s, last %s", evs[0].Type, evs[len(evs)-1].Type)
	}
	if seen[live.EventPointEnd] != seen[live.EventPointStart] || seen[live.EventPointEnd] < 2 {
		t.Errorf("%d point starts, %d ends", seen[live.EventPointStart], seen[live.EventPointEnd])
	}
	var table bytes.Buffer
	if err := report.Terminal(&table, rebuild(t, evs), 0); err != nil {
		t.Fatal(err)
	}
	// The events carry no samples, which the projected walls are made
	// of: the rebuilt table has none, and the printed line is left out.
	var printed []string
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.Contains(l, "projected walls, from") {
			printed = append(printed, l)
		}
	}
	if strings.Contains(table.String(), "projected walls") || !strings.Contains(stderr, "projected walls, from") {
		t.Errorf("projected walls: the printed output should state them, the table rebuilt without samples not:\n%s", table.String())
	}
	if stderr := strings.Join(printed, ""); !strings.Contains(stderr, table.String()) {
		t.Errorf("table from the events:\n%s\nnot in the output:\n%s", table.String(), stderr)
	}
	if !strings.Contains(table.String(), "Verdict at the 100% threshold: capacity 8; first failure 9;") {
		t.Errorf("rebuilt table has no verdict:\n%s", table.String())
	}
	end := evs[len(evs)-1]
	saved, err := result.Load(end.Path)
	if err != nil {
		t.Fatal(err)
	}
	for i, pt := range saved.Points {
		var got *result.Point
		for _, ev := range evs {
			if ev.Type == live.EventPointEnd && ev.Point.StartedAt.Equal(pt.StartedAt) {
				got = ev.Point
			}
		}
		if got == nil || got.Connected != pt.Connected || got.Passed != pt.Passed {
			t.Errorf("point %d (%d clients): event %+v, run.json connected %d passed %v", i, pt.Clients, got, pt.Connected, pt.Passed)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// prometheus starts Debian's Prometheus on loopback scraping target
// every 200 ms, and returns its HTTP address; it is killed by its PID and
// reaped when the test ends.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	const bin = "/usr/bin/prometheus"
	if _, err := os.Stat(bin); err != nil {
		parts.Missing(t, "no %s (scripts/setup.sh installs Debian's prometheus): %v", bin, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf("global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: rdmaprobe\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})
	eventually.True(t, 60*time.Second, "prometheus ready at "+addr, func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited: %s", logs.String())
		default:
		}
		r, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	// Its scrapes begin only when its discovery hands the target over,
	// up to 5 s after the start (the discovery manager's update period):
	// a run started before then is not watched from its start.
	eventually.True(t, 60*time.Second, "prometheus scrapes "+target, func() bool {
		return len(promQuery(t, addr, `up{job="rdmaprobe"}`)) > 0
	})
	return addr
}

// promQuery runs an instant PromQL query and returns each series'
// samples (one for an instant vector, all for a range).
func promQuery(t *testing.T, addr, q string) [][]float64 {
	t.Helper()
	r, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Value  []any
				Values [][]any
			}
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: status %q, %v", q, body.Status, err)
	}
	var out [][]float64
	for _, s := range body.Data.Result {
		vals := s.Values
		if s.Value != nil {
			vals = [][]any{s.Value}
		}
		var fs []float64
		for _, v := range vals {
			f, err := strconv.ParseFloat(v[1].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, f)
		}
		out = append(out, fs)
	}
	return out
}

// A real Prometheus scraping a sim ramp stores the connected count of
// the point in progress, and, during --metrics-linger, the final
// point's; the endpoint is closed once the run returns.
func TestPrometheusScrapesRun(t *testing.T) {
	metrics := freePort(t)
	prom := startPrometheus(t, metrics)
	root := t.TempDir()
	const last = 60
	var out, errb bytes.Buffer
	code := -1
	done := make(chan struct{})
	// Cancelling ctx ends the linger once Prometheus has what it needs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer close(done)
		// --connect-rate spreads the last point's connects over 1.5 s, which
		// Prometheus scrapes 7 times. No traffic phase: the connected
		// counts are the subject.
		code = MainContext(ctx, []string{"rdmaprobe", "ramp", "--backend", "sim", "--clients", "10," + itoa(last), "--connect-rate", "40",
			"--rounds", "1", "--msg-size", "64", "--traffic", "0", "--calibrate", "0", "--results", root,
			"--metrics-addr", metrics, "--metrics-linger", "10m", "--events", "-"},
			Streams{In: bytes.NewReader(nil), Out: &out, Err: &errb})
	}()
	q := fmt.Sprintf(`rdmaprobe_point_connected{point="%d",backend="sim",command="ramp"}`, last)
	final := -1.0
	eventually.True(t, 2*time.Minute, "prometheus has the final point's connected count", func() bool {
		select {
		case <-done:
			t.Fatalf("run ended before Prometheus saw its final point (exit %d): %s", code, errb.String())
		default:
		}
		n := promQuery(t, prom, `sum(rdmaprobe_points_total{command="ramp"})`)
		if len(n) == 0 || n[0][0] < 2 {
			return false
		}
		res := promQuery(t, prom, q)
		if len(res) == 1 {
			final = res[0][0]
		}
		return final == last
	})
	// The point's samples while it ran: some between none and all.
	inProgress := false
	for _, s := range promQuery(t, prom, q+"[5m]") {
		for _, v := range s {
			if v > 0 && v < last {
				inProgress = true
			}
		}
	}
	if !inProgress {
		t.Errorf("no sample of %s between 0 and %d: %v", q, last, promQuery(t, prom, q+"[5m]"))
	}
	select {
	case <-done:
		t.Fatal("run returned before its linger")
	default:
	}
	cancel()
	<-done
	if code != ExitMeasured {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if c, err := net.Dial("tcp", metrics); err == nil {
		c.Close()
		t.Errorf("%s still accepts after the run", metrics)
	}
	var ends []int
	for _, ev := range readEvents(t, &out) {
		if ev.Type == live.EventPointEnd {
			ends = append(ends, ev.Point.Connected)
		}
	}
	if len(ends) != 2 || ends[1] != last {
		t.Errorf("point_end connected counts %v", ends)
	}
}

// The traffic phase's messages reach /metrics while its window is open,
// not only when the point ends: a scrape during a 2.5 s phase of a sim
// ramp sees them rise (a generator counts them once a second).
func TestMetricsTrafficDuringPhase(t *testing.T) {
	metrics := freePort(t)
	var out, errb bytes.Buffer
	done := make(chan struct{})
	code := -1
	go func() {
		defer close(done)
		code = MainContext(context.Background(), []string{"rdmaprobe", "ramp", "--backend", "sim", "--clients", "4",
			"--traffic", "2500ms", "--traffic-max", "2500ms", "--msg-size", "64", "--calibrate", "0", "--results", t.TempDir(),
			"--metrics-addr", metrics}, Streams{In: bytes.NewReader(nil), Out: &out, Err: &errb})
	}()
	line := regexp.MustCompile(`(?m)^rdmaprobe_traffic_messages\{[^}]*point="4"[^}]*\} ([0-9.e+]+)$`)
	var during float64
	eventually.True(t, 2*time.Minute, "a scrape during the phase shows its messages", func() bool {
		select {
		case <-done:
			t.Fatalf("the run ended (exit %d) before a scrape saw its traffic: %s", code, errb.String())
		default:
		}
		r, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		// Only a scrape before the point ended counts: points_total
		// gets its first sample when it does.
		if bytes.Contains(b, []byte("rdmaprobe_points_total{")) {
			t.Fatalf("the point ended before a scrape saw its traffic:\n%s", b)
		}
		if m := line.FindSubmatch(b); m != nil {
			during, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		return during > 0
	})
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Logf("%.0f messages scraped during the phase", during)
}
