package result

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/hist"
)

// generator builds one generator's report: clients each with count
// messages, latencies spread evenly from lo to hi.
func generator(clients int, count int64, lo, hi time.Duration, dur float64) Traffic {
	t := Traffic{Op: OpSend, MsgBytes: 4096, Depth: 1, DurationSec: dur, Clients: clients,
		LatencyHist: hist.Latency(), ClientHist: hist.Counts(), GeneratorCPU: 0.5, GeneratorCores: 1}
	for c := 0; c < clients; c++ {
		t.ClientHist.Record(count)
		for i := int64(0); i < count; i++ {
			t.LatencyHist.RecordDuration(lo + time.Duration(float64(hi-lo)*float64(i)/float64(count)))
			t.Messages++
			t.Bytes += 4096
		}
	}
	return t
}

func near(a, b float64) bool { return math.Abs(a-b) <= 0.01*math.Abs(b)+1e-9 }

func TestMergeSummarize(t *testing.T) {
	a := generator(10, 1000, 100*time.Microsecond, 200*time.Microsecond, 2)
	b := generator(30, 500, time.Millisecond, 3*time.Millisecond, 2.5)
	b.Errors = map[string]int64{"RETRY_EXC_ERR": 2}
	b.ErrorText = map[string]string{"RETRY_EXC_ERR": "send completion: transport retry counter exceeded"}
	b.ClientsFailed = 2
	b.GeneratorCPU, b.GeneratorCores = 1.95, 2

	var m Traffic
	m.Merge(a)
	m.Merge(b)
	m.Summarize()
	if m.Clients != 40 || m.Messages != 25000 || m.DurationSec != 2.5 || m.ClientsFailed != 2 {
		t.Fatalf("merged counts: %+v", m)
	}
	if !near(m.MsgRate, 10000) || !near(m.MBps, 25000*4096/2.5/1e6) {
		t.Errorf("rate %v msg/s, %v MB/s", m.MsgRate, m.MBps)
	}
	// 10,000 messages at 100-200 µs and 15,000 at 1-3 ms: the median is
	// in the second generator's range, p99 near its top.
	if m.Latency.P50 < 1000 || m.Latency.P50 > 1700 || m.Latency.P99 < 2900 || m.Latency.Max < 2990 || m.Latency.N != 25000 {
		t.Errorf("latency %+v", m.Latency)
	}
	if !near(m.PerClient.Min, 500/2.5) || !near(m.PerClient.Max, 1000/2.5) || !near(m.PerClient.Median, 500/2.5) {
		t.Errorf("per client %+v", m.PerClient)
	}
	if m.ErrorCount() != 2 || m.ErrorClasses()[0] != "RETRY_EXC_ERR" {
		t.Errorf("errors %v", m.Errors)
	}
	// The second generator used 1.95 of 2 cores: the harness's limit.
	if m.GeneratorCPU != 1.95 || !strings.Contains(m.HarnessLimit, "1.95 of its 2 cores") {
		t.Errorf("generator CPU %v/%d, harness limit %q", m.GeneratorCPU, m.GeneratorCores, m.HarnessLimit)
	}
	f := m.Figures(3)
	if f.Errors != 5 || f.P99 != time.Duration(m.Latency.P99*1e3) || f.Rate != m.MsgRate || f.ClientRate != m.PerClient.Min {
		t.Errorf("figures %+v", f)
	}
}

func TestScheduleLateIsHarnessLimit(t *testing.T) {
	tr := generator(1, 100, time.Microsecond, 2*time.Microsecond, 1)
	tr.Schedule = &Schedule{Due: 1000, Late: 5, Blocked: 400}
	tr.Summarize()
	if tr.HarnessLimit != "" {
		t.Errorf("0.5%% late (and messages blocked behind slow echoes, the server's doing) called a harness limit: %q", tr.HarnessLimit)
	}
	var m Traffic
	m.Merge(tr)
	m.Merge(Traffic{Schedule: &Schedule{Due: 1000, Late: 50}})
	m.Summarize()
	if m.Schedule.Due != 2000 || m.Schedule.Late != 55 || !strings.Contains(m.HarnessLimit, "55 of 2000 due messages") {
		t.Errorf("schedule %+v, harness limit %q", m.Schedule, m.HarnessLimit)
	}
}

// A busy-polled generator uses its whole CPU: only what it did not
// spend polling empty CQs says whether it was the limit, and merging
// keeps the generator that worked the most, with its spin.
func TestGeneratorSpinIsNotWork(t *testing.T) {
	idle := generator(1, 100, time.Microsecond, 2*time.Microsecond, 1)
	idle.GeneratorCPU, idle.GeneratorSpin = 0.99, 0.45
	idle.Summarize()
	if idle.HarnessLimit != "" {
		t.Errorf("0.99 of 1 core, 0.45 of it polling empty CQs, called a harness limit: %q", idle.HarnessLimit)
	}
	busy := generator(1, 100, time.Microsecond, 2*time.Microsecond, 1)
	busy.GeneratorCPU, busy.GeneratorSpin = 0.99, 0.02
	busy.Summarize()
	if want := "a load generator used 0.99 of its 1 cores, 0.02 of them polling empty CQs"; busy.HarnessLimit != want {
		t.Errorf("harness limit %q, want %q", busy.HarnessLimit, want)
	}
	for _, order := range [][]Traffic{{idle, busy}, {busy, idle}} {
		var m Traffic
		m.Merge(order[0])
		m.Merge(order[1])
		m.Summarize()
		if m.GeneratorSpin != 0.02 || m.HarnessLimit != busy.HarnessLimit {
			t.Errorf("merged spin %v, harness limit %q", m.GeneratorSpin, m.HarnessLimit)
		}
	}
	b, err := json.Marshal(idle)
	if err != nil || !strings.Contains(string(b), `"generator_spin_cores":0.45`) {
		t.Errorf("JSON %s (%v)", b, err)
	}
}

// The saved phase does not grow with its duration: ten times the
// messages, about the same bytes.
func TestTrafficJSONSize(t *testing.T) {
	short := generator(100, 100, 50*time.Microsecond, 5*time.Millisecond, 1)
	long := generator(100, 1000, 50*time.Microsecond, 5*time.Millisecond, 10)
	short.Summarize()
	long.Summarize()
	bs, _ := json.Marshal(short)
	bl, err := json.Marshal(long)
	if err != nil {
		t.Fatal(err)
	}
	if len(bl) > len(bs)*3/2 || len(bl) > 16<<10 {
		t.Errorf("JSON of the phase: %d bytes for 1e4 messages, %d for 1e5", len(bs), len(bl))
	}
	var back Traffic
	if err := json.Unmarshal(bl, &back); err != nil {
		t.Fatal(err)
	}
	back.Summarize()
	if back.Latency != long.Latency || back.PerClient != long.PerClient {
		t.Errorf("re-summarised from JSON: %+v %+v, want %+v %+v", back.Latency, back.PerClient, long.Latency, long.PerClient)
	}
}
