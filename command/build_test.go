package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestBuilder builds like the compiled-cap fixture is built: once per N,
// again only when a source changes, never for a second trial.
func TestBuilder(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "server.c"), []byte("v1"), 0o644)
	runs := filepath.Join(t.TempDir(), "runs")
	b := &Builder{
		// Reads the source directory (named in argv), writes {build}/server.
		Argv: []string{"sh", "-c", `echo "build N=$1" >> "$RUNS"; cat "$0"/server.c > "$2"/server; echo "MAX=$1" >> "$2"/server`, src, "{n}", "{build}"},
		Dir:  filepath.Join(t.TempDir(), "cache"),
		Env:  []string{"RUNS=" + runs},
	}
	ctx := context.Background()
	ensure := func(n int) Built {
		t.Helper()
		r, err := b.Ensure(ctx, map[string]string{"n": itoa(n)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	count := func() int {
		data, _ := os.ReadFile(runs)
		return strings.Count(string(data), "build")
	}
	a := ensure(10)
	if a.Cached || count() != 1 || !contains(a.Inputs, src) {
		t.Fatalf("first build: %+v, %d runs", a, count())
	}
	if data, _ := os.ReadFile(filepath.Join(a.Dir, "server")); string(data) != "v1MAX=10\n" {
		t.Errorf("built %q", data)
	}
	if again := ensure(10); !again.Cached || again.Dir != a.Dir || count() != 1 {
		t.Errorf("same N and sources rebuilt: %+v, %d runs", again, count())
	}
	if other := ensure(20); other.Cached || other.Dir == a.Dir || count() != 2 {
		t.Errorf("another N: %+v", other)
	}
	os.WriteFile(filepath.Join(src, "server.c"), []byte("v2"), 0o644)
	if changed := ensure(10); changed.Cached || changed.Dir == a.Dir || count() != 3 {
		t.Errorf("changed source reused %+v", changed)
	}

	// Concurrent callers of one key build it once.
	os.WriteFile(filepath.Join(src, "server.c"), []byte("v3"), 0o644)
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Ensure(ctx, map[string]string{"n": "30"})
			if err != nil {
				t.Error(err)
			}
			dirs[i] = r.Dir
		}()
	}
	wg.Wait()
	if count() != 4 || dirs[0] != dirs[3] {
		t.Errorf("concurrent builds: %d runs, dirs %v", count(), dirs)
	}

	// A failing build is an error with its exit and last words, leaves no
	// output directory, and is tried again next time.
	bad := &Builder{Argv: []string{"sh", "-c", `echo "server.c:3: error: MAX_CLIENTS undeclared" >&2; exit 2`, "{n}"}, Dir: b.Dir}
	_, err := bad.Ensure(ctx, map[string]string{"n": "5"})
	var be *BuildError
	if !errors.As(err, &be) || be.Exit.Code != 2 || !strings.Contains(err.Error(), "MAX_CLIENTS undeclared") {
		t.Fatalf("failed build: %v", err)
	}
	for _, p := range mustGlob(t, filepath.Join(b.Dir, "*")) {
		if fi, _ := os.Stat(p); fi.IsDir() {
			if _, err := os.Stat(filepath.Join(p, buildMarker)); err != nil {
				t.Errorf("unfinished output directory %s left in the cache", p)
			}
		}
	}
	// Bad templates fail before running anything.
	if _, err := (&Builder{Argv: []string{"make", "N={nn}"}, Dir: b.Dir}).Ensure(ctx, map[string]string{"n": "1"}); err == nil || !strings.Contains(err.Error(), "{nn}") {
		t.Errorf("unknown placeholder: %v", err)
	}
	if _, err := (&Builder{Argv: []string{"/nonexistent/cc"}, Dir: b.Dir}).Ensure(ctx, nil); !errors.As(err, &be) || be.Err == nil {
		t.Errorf("missing compiler: %v", err)
	}
}

func mustGlob(t *testing.T, pat string) []string {
	m, err := filepath.Glob(pat)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func itoa(n int) string { return Vars(n, 0, 0, "")["n"] }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
