package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Saved is a saved run or bench file, read once: what report and
// compare render.
type Saved struct {
	// Kind is the file's kind (result.KindRun or bench.Kind); Run or
	// Bench holds it.
	Kind  string
	Run   *result.Run
	Bench *bench.Run
}

// Load reads path (a file, or a run's directory: SavedPath),
// decompressed once, and parses it by its kind; every error is one line
// naming the file.
func Load(path string) (Saved, error) {
	path, err := SavedPath(path)
	if err != nil {
		return Saved{}, err
	}
	kind, b, err := result.ReadKind(path)
	if err != nil {
		return Saved{}, err
	}
	f := Saved{Kind: kind}
	if kind == bench.Kind {
		f.Bench, err = bench.Parse(b)
	} else {
		f.Run, err = result.Parse(b)
	}
	if err != nil {
		return Saved{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// SavedPath is the saved file of a run's directory (its run.json or
// bench.json, gzipped or not), or path itself when it is a file.
func SavedPath(path string) (string, error) {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return path, nil
	}
	for _, name := range []string{result.FileName, result.FileName + ".gz", bench.FileName, bench.FileName + ".gz"} {
		p := filepath.Join(path, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: a directory without %s or %s", path, result.FileName, bench.FileName)
}

// Measured refuses, in one line, a run (not a bench file) saved at path
// that holds no point to report, not even one cut short: one that never
// started says why, one that stopped before its first point says what
// stopped it.
func (s Saved) Measured(path string) error {
	run := s.Run
	if run == nil || len(run.Points) > 0 || run.Interrupted != nil {
		return nil
	}
	switch {
	case strings.HasPrefix(run.Error, result.NotStarted):
		return fmt.Errorf("%s: the run never started: %s", path, strings.TrimPrefix(run.Error, result.NotStarted))
	case run.Error != "":
		return fmt.Errorf("%s: no point was measured: the run stopped (%s)", path, run.Error)
	}
	return fmt.Errorf("%s: no point was measured yet (the run may still be in progress)", path)
}

// KindName says what a file of kind k holds, for messages.
func KindName(k string) string {
	switch k {
	case result.KindRun:
		return "a capacity run"
	case bench.Kind:
		return "a bench file"
	}
	return fmt.Sprintf("a file of kind %q", k)
}

// RunName names a run in a comparison by its directory.
func RunName(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Base(filepath.Clean(path))
	}
	return filepath.Base(filepath.Dir(filepath.Clean(path)))
}

// ParseFormats reads --format: md, html or both, comma-separated.
func ParseFormats(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f != "md" && f != "html" {
			return nil, fmt.Errorf("--format %q: want md, html or md,html", s)
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--format is empty: want md, html or md,html")
	}
	return out, nil
}
