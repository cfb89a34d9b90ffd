package soak

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// A soak's record holds its command and backend beside its figures, and
// each sample prints as one row under the header's columns.
func TestSaveAndPrint(t *testing.T) {
	res := &Result{Served: 600, Failures: 1, Samples: []Sample{{ElapsedSec: 30, Served: 300, RSSBytes: 3 << 20, OpenFiles: 12}}}
	path, err := Save(t.TempDir(), []string{"rdmaprobe", "bench", "soak"}, "sim", res)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Kind, Backend string
		Command       []string
		Served        int
	}
	if err := json.Unmarshal(b, &got); err != nil || got.Kind != "soak" || got.Backend != "sim" || got.Served != 600 || len(got.Command) != 3 {
		t.Errorf("saved %s (%v)", b, err)
	}
	var w bytes.Buffer
	PrintHeader(&w)
	PrintSample(&w, res.Samples[0])
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) != 2 || len(strings.Fields(lines[0])) != len(strings.Fields(lines[1]))+2 || !strings.Contains(lines[1], "3.0") {
		t.Errorf("table:\n%s", w.String())
	}
}
