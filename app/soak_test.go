package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/soak"
)

// bench soak on sim: serve runs as a child, waves of clients come and
// go, and every interval's figures are real readings of that process;
// nothing of it is left running. Three intervals of 1 s give the two
// samples checkSoak needs.
func TestSoakSim(t *testing.T) {
	checkSoak(t, "sim", "--backend", "sim", "--soak-duration", "3s")
	if kids := children(t); len(kids) != 0 {
		t.Errorf("child processes left: %v", kids)
	}
}

// The same inside the Soft-RoCE guest, serve and clients on rxe0.
//
// Guest, shared: the verbs server's memory per client served on rxe, which sim does not allocate.
func TestVMSoak(t *testing.T) {
	needVM(t)
	// Two intervals of 2 s (about 50 clients served in each on the
	// guest) are the two samples checkSoak needs: a sample is taken as
	// a wave ends, so 6 s leave a wave 2 s to end the second interval.
	checkSoak(t, "vm", "--backend", "vm", "--vm-mem", "2048", "--soak-duration", "6s", "--interval", "2s")
}

func checkSoak(t *testing.T, backend string, args ...string) {
	t.Helper()
	root := t.TempDir()
	out, errOut, code := run(t, append([]string{"bench", "soak", "--soak-duration", "4s", "--interval", "1s", "--wave", "20",
		"--max-clients", "40", "--traffic", "200ms", "--msg-size", "256", "--results", root}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*-soak-"+backend, soak.FileName))
	if len(files) != 1 {
		t.Fatalf("soak files %v\n%s", files, out)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var res soak.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	t.Log(out)
	if len(res.Samples) < 2 || res.Served < 40 || res.Failures != 0 {
		t.Fatalf("%d samples, %d served, %d failed; want 2 or more, 40 or more, none\n%s", len(res.Samples), res.Served, res.Failures, out)
	}
	prev := 0
	for i, s := range res.Samples {
		if s.RSSBytes == 0 || s.RetainedHeapBytes == 0 || s.OpenFiles == 0 || s.Threads == 0 || s.Mappings == 0 || s.Served <= prev {
			t.Errorf("sample %d: %+v: a reading is missing or served did not grow from %d", i, s, prev)
		}
		if s.Messages == 0 {
			t.Errorf("sample %d: no message in the traffic phases", i)
		}
		prev = s.Served
	}
	if res.Server == nil || res.Server.Connected < res.Samples[len(res.Samples)-1].Served || res.Server.Failures["message"] != 0 {
		t.Errorf("server's counters %+v", res.Server)
	}
	if !strings.Contains(out, "growth per 100,000 clients served") {
		t.Errorf("no growth line:\n%s", out)
	}
}

// Bad soak flags: one line and exit status 2, before anything starts.
func TestSoakUsage(t *testing.T) {
	for _, tc := range [][]string{
		{"bench", "soak", "--wave", "0"},
		{"bench", "soak", "--wave", "300", "--max-clients", "100"},
		{"bench", "soak", "--backend", "rxe"},
		{"bench", "soak", "--mode", "bogus"},
		{"bench", "soak", "--soak-duration", "soon"},
	} {
		out, errOut, code := run(t, append(tc, "--results", t.TempDir())...)
		if code != ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "rdmaprobe: bench soak: ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc, code, out, errOut)
		}
	}
}
