package protocol

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
)

func threadSlacks(t *testing.T, pid string) map[string]string {
	t.Helper()
	if _, err := os.Stat("/proc/self/timerslack_ns"); err != nil {
		t.Skip("no /proc/PID/timerslack_ns (Linux ≥ 4.6)")
	}
	tids, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/" + tid.Name() + "/timerslack_ns")
		if err != nil {
			continue // the thread exited
		}
		m[tid.Name()] = strings.TrimSpace(string(b))
	}
	return m
}

// Every thread of the process gets the slack, and the restore gives
// each its default back: this process's, and another's.
func TestSlackenThreads(t *testing.T) {
	t.Run("self", func(t *testing.T) { testSlacken(t, 0, "self") })
	t.Run("child", func(t *testing.T) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		testSlacken(t, cmd.Process.Pid, strconv.Itoa(cmd.Process.Pid))
	})
}

func testSlacken(t *testing.T, pid int, proc string) {
	before := threadSlacks(t, proc)
	restore := SlackenThreads(pid, 7*time.Millisecond)
	during := threadSlacks(t, proc)
	restore()
	after := threadSlacks(t, proc)
	if len(during) == 0 {
		t.Fatalf("no thread of /proc/%s read", proc)
	}
	for p, v := range during {
		if _, existed := before[p]; !existed {
			continue // started meanwhile
		}
		if v != "7000000" {
			if os.Geteuid() != 0 {
				t.Skipf("%s kept %s ns: setting another thread's slack needs CAP_SYS_NICE", p, v)
			}
			t.Errorf("%s: %s ns while slackened, want 7000000", p, v)
		}
		if a, ok := after[p]; ok && a != before[p] {
			t.Errorf("%s: %s ns after the restore, %s before", p, a, before[p])
		}
	}
}

// A closed-loop phase keeps the connect's timer slack; an open loop,
// which paces messages with timers, and a run without a phase do not.
func TestKeepsSlack(t *testing.T) {
	for _, c := range []struct {
		cfg  client.TrafficConfig
		want bool
	}{
		{client.TrafficConfig{Duration: time.Second}, true},
		{client.TrafficConfig{Duration: time.Second, BusyPoll: time.Millisecond, Depth: 4}, true},
		{client.TrafficConfig{Duration: time.Second, Rate: 100}, false},
		{client.TrafficConfig{}, false},
	} {
		if got := KeepsSlack(c.cfg); got != c.want {
			t.Errorf("KeepsSlack(%+v) = %v, want %v", c.cfg, got, c.want)
		}
	}
}
