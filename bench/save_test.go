package bench

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// A bench run saves whole and loads back; one ended by an error says so
// and is not complete.
func TestRunSaveFinish(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	run := NewRun("v1", []string{"rdmaprobe", "bench"}, result.Backend{Name: "sim", Simulated: true}, Config{N: 3, Passes: 1})
	run.RDMACM = &CMRun{N: 3, Passes: 1, Limits: CMLimits(2)}
	if err := run.Save(path); err != nil {
		t.Fatal(err)
	}
	if err := run.Finish(path, errors.New("guest died")); err == nil || err.Error() != "guest died" {
		t.Errorf("Finish returned %v, want the run's error", err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Complete || got.Error != "guest died" || got.ToolVersion != "v1" || got.FinishedAt.IsZero() ||
		got.RDMACM == nil || !strings.Contains(got.RDMACM.Limits, "2 emulated CPUs") {
		t.Errorf("loaded %+v", got)
	}
}
