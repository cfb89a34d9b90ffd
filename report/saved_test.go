package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// A run's directory loads as its run.json; a run with no point says why
// in one line; --format takes md and html only.
func TestLoadSaved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "20261205T000000Z-sim")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := &result.Run{SchemaVersion: result.SchemaVersion, Tool: "rdmaprobe", Error: result.NotStarted + "no guest"}
	if _, err := result.SaveRun(dir, run); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil || s.Kind != result.KindRun || s.Run == nil || s.Bench != nil {
		t.Fatalf("Load(%s) = %+v, %v", dir, s, err)
	}
	if err := s.Measured(dir); err == nil || !strings.Contains(err.Error(), "the run never started: no guest") {
		t.Errorf("a run that never started: %v", err)
	}
	if got := RunName(dir); got != "20261205T000000Z-sim" {
		t.Errorf("RunName = %q", got)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "a directory without run.json") {
		t.Errorf("an empty directory: %v", err)
	}
	for in, want := range map[string]string{"md": "md", " html , md ": "html,md", "pdf": "", ",": ""} {
		got, err := ParseFormats(in)
		if strings.Join(got, ",") != want || (want == "") != (err != nil) {
			t.Errorf("ParseFormats(%q) = %v, %v", in, got, err)
		}
	}
}
