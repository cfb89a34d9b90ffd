package verbsbin

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/filelock"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSourceHash(t *testing.T) {
	base := map[string]string{
		"go.mod":             "module example.com/m\n\ngo 1.22\n",
		"go.sum":             "",
		"main.go":            "package main\n\nfunc main() {}\n",
		"fabric/x.go":        "package fabric\n",
		"templates/t.go":     "package templates\n\nimport \"embed\"\n\n//go:embed *.html\nvar FS embed.FS\n",
		"templates/a.html":   "<p>a</p>",
		"fabric/x_test.go":   "package fabric\n",
		"fabric/notes.md":    "notes",
		"testdata/f.go":      "package x\n",
		"results/r/run.json": "{}",
		".git/HEAD":          "ref: refs/heads/main\n",
		"_tools/t.go":        "package tools\n",
	}
	for _, tc := range []struct {
		name    string
		path    string
		body    string
		changes bool
	}{
		{"go source", "fabric/x.go", "package fabric\n\nvar X = 1\n", true},
		{"new go file", "fabric/y.go", "package fabric\n", true},
		{"go.mod", "go.mod", "module example.com/m\n\ngo 1.23\n", true},
		{"go.sum", "go.sum", "x v1 h1:abc\n", true},
		{"cgo C file", "fabric/c.c", "int x;\n", true},
		{"embedded template", "templates/a.html", "<p>b</p>", true},
		{"test file", "fabric/x_test.go", "package fabric\n\nvar T = 1\n", false},
		{"markdown", "fabric/notes.md", "other notes", false},
		{"testdata", "testdata/f.go", "package y\n", false},
		{"saved results", "results/r2/run.json", "{}", false},
		{"git", ".git/HEAD", "ref: refs/heads/other\n", false},
		{"underscore dir", "_tools/t.go", "package other\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, base)
			before, err := SourceHash(dir)
			if err != nil {
				t.Fatal(err)
			}
			again, err := SourceHash(dir)
			if err != nil || again != before {
				t.Fatalf("hash not stable: %s then %s (%v)", before, again, err)
			}
			if len(before) != 16 {
				t.Errorf("hash %q: want 16 hex digits", before)
			}
			writeTree(t, dir, map[string]string{tc.path: tc.body})
			after, err := SourceHash(dir)
			if err != nil {
				t.Fatal(err)
			}
			if (after != before) != tc.changes {
				t.Errorf("editing %s: hash %s → %s, want changed=%v", tc.path, before, after, tc.changes)
			}
		})
	}
}

// A file's content moving into its name must not collide.
func TestSourceHashFraming(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, map[string]string{"go.mod": "module m\n", "ab.go": "c"})
	writeTree(t, b, map[string]string{"go.mod": "module m\n", "a.go": "bc"})
	ha, _ := SourceHash(a)
	hb, _ := SourceHash(b)
	if ha == hb {
		t.Fatal("different trees hash alike")
	}
}

func fakeBuild(t *testing.T) *int {
	t.Helper()
	n := new(int)
	orig := goBuild
	goBuild = func(_ context.Context, moduleDir, out string) error {
		*n++
		return os.WriteFile(out, []byte("#!/bin/sh\n"), 0o755)
	}
	t.Cleanup(func() { goBuild = orig })
	return n
}

// withHeader points the headers at a directory holding those of the
// names given that are present.
func withHeader(t *testing.T, present ...bool) {
	t.Helper()
	orig := headers
	dir := t.TempDir()
	headers = []string{filepath.Join(dir, "verbs.h"), filepath.Join(dir, "rdma_cma.h")}
	for i, h := range headers {
		if present[min(i, len(present)-1)] {
			if err := os.WriteFile(h, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { headers = orig })
}

func TestEnsureBinaryCaches(t *testing.T) {
	withHeader(t, true)
	builds := fakeBuild(t)
	mod, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	writeTree(t, mod, map[string]string{"go.mod": "module m\n", "main.go": "package main\n"})
	ctx := context.Background()

	p1, err := EnsureBinary(ctx, mod, cache)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := SourceHash(mod)
	if want := filepath.Join(cache, "rdmaprobe-verbs-"+sum); p1 != want {
		t.Errorf("path %s, want %s", p1, want)
	}
	p2, err := EnsureBinary(ctx, mod, cache)
	if err != nil || p2 != p1 || *builds != 1 {
		t.Fatalf("second call: %s %v, %d builds; want the cached %s and 1 build", p2, err, *builds, p1)
	}

	writeTree(t, mod, map[string]string{"main.go": "package main\n\nfunc main() {}\n"})
	p3, err := EnsureBinary(ctx, mod, cache)
	if err != nil || p3 == p1 || *builds != 2 {
		t.Fatalf("after an edit: %s %v, %d builds; want a new binary and 2 builds", p3, err, *builds)
	}
	// The older binary stays: another checkout, or a run that started
	// before the edit, may be about to run it.
	left, _ := filepath.Glob(filepath.Join(cache, binaryPrefix+"*"))
	if len(left) != 2 {
		t.Errorf("cache holds %v, want %s and %s", left, p1, p3)
	}
}

// A build prunes only what has gone unused for a day: binaries (each use
// marks its binary used) and the directories of builds killed midway.
func TestEnsureBinaryPrunesOnlyUnused(t *testing.T) {
	withHeader(t, true)
	fakeBuild(t)
	mod, cache := t.TempDir(), t.TempDir()
	writeTree(t, mod, map[string]string{"go.mod": "module m\n"})
	ctx := context.Background()
	dayAgo := time.Now().Add(-maxUnused - time.Hour)
	age := func(p string, at time.Time) {
		t.Helper()
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	unused := filepath.Join(cache, binaryPrefix+"0000000000000000")
	recent := filepath.Join(cache, binaryPrefix+"1111111111111111")
	killed := filepath.Join(cache, buildingPrefix+"1")
	running := filepath.Join(cache, buildingPrefix+"2")
	writeTree(t, cache, map[string]string{filepath.Base(unused): "", filepath.Base(recent): "",
		filepath.Base(killed) + "/rdmaprobe": "", filepath.Base(running) + "/rdmaprobe": ""})
	age(unused, dayAgo)
	age(killed, dayAgo)
	age(recent, time.Now().Add(-time.Hour))

	p, err := EnsureBinary(ctx, mod, cache)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{p: true, unused: false, recent: true, killed: false, running: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s: exists=%v after a build, want %v", filepath.Base(path), err == nil, want)
		}
	}

	// A cached binary that is used again is marked used.
	age(p, dayAgo)
	if _, err := EnsureBinary(ctx, mod, cache); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || time.Since(fi.ModTime()) > time.Hour {
		t.Errorf("a cached binary used again is not marked used: %v %v", fi.ModTime(), err)
	}
}

// Pruning waits while a binary is being looked up and marked used, so a
// binary another process has just been given is never removed under it.
func TestPruneWaitsForUse(t *testing.T) {
	cache := t.TempDir()
	old := filepath.Join(cache, binaryPrefix+"0000000000000000")
	writeTree(t, cache, map[string]string{filepath.Base(old): ""})
	unlock, err := filelock.Lock(context.Background(), filepath.Join(cache, useLock), true)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := prune(ctx, cache, time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("prune during a use: %v, want it to wait", err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("pruned during a use: %v", err)
	}
}

func TestEnsureBinaryBuildFailureLeavesNoBinary(t *testing.T) {
	withHeader(t, true)
	orig := goBuild
	goBuild = func(_ context.Context, _, out string) error {
		os.WriteFile(out, []byte("partial"), 0o755)
		return os.ErrInvalid
	}
	t.Cleanup(func() { goBuild = orig })
	mod, cache := t.TempDir(), t.TempDir()
	writeTree(t, mod, map[string]string{"go.mod": "module m\n"})
	if _, err := EnsureBinary(context.Background(), mod, cache); err == nil {
		t.Fatal("no error")
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "[^.]*")); len(left) != 0 {
		t.Errorf("cache holds %v after a failed build", left)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, buildingPrefix+"*")); len(left) != 0 {
		t.Errorf("cache holds %v after a failed build", left)
	}
}

// Either header missing (libibverbs' or librdmacm's) and nothing is
// built.
func TestEnsureBinaryWithoutHeaders(t *testing.T) {
	for _, present := range [][]bool{{false, false}, {true, false}, {false, true}} {
		withHeader(t, present...)
		builds := fakeBuild(t)
		_, err := EnsureBinary(context.Background(), t.TempDir(), t.TempDir())
		if err != ErrNoHeaders {
			t.Fatalf("headers %v: got %v", present, err)
		}
		if *builds != 0 {
			t.Errorf("headers %v: built without them", present)
		}
	}
	if !strings.Contains(ErrNoHeaders.Error(), "apt-get install libibverbs-dev librdmacm-dev") {
		t.Errorf("%v", ErrNoHeaders)
	}
}

// TestEnsureBinaryRealBuild runs the real go build once, on a tiny module
// whose verbs-tagged file must be compiled in.
func TestEnsureBinaryRealBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	withHeader(t, true)
	mod, cache := t.TempDir(), t.TempDir()
	writeTree(t, mod, map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nvar tag = \"untagged\"\n\nfunc main() { fmt.Print(tag) }\n",
		"tag.go":  "//go:build verbs\n\npackage main\n\nfunc init() { tag = \"verbs\" }\n",
	})
	p, err := EnsureBinary(context.Background(), mod, cache)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p).Output()
	if err != nil || string(out) != "verbs" {
		t.Fatalf("built binary says %q (%v), want verbs", out, err)
	}

	writeTree(t, mod, map[string]string{"main.go": "package main\n\nfunc main() { undefined() }\n"})
	_, err = EnsureBinary(context.Background(), mod, cache)
	if err == nil || !strings.Contains(err.Error(), "undefined") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("broken module: %v; want one line naming the compile error", err)
	}
}

// Concurrent callers into one empty cache (the test binaries of one
// `go test ./...`, two checkouts with different sources) all get a binary
// that runs: one build per source tree, and no caller's binary removed
// by another's build. The lock is flock(2), held per open file, so
// goroutines here contend for it as processes do.
func TestEnsureBinaryConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	withHeader(t, true)
	var builds atomic.Int32
	orig := goBuild
	goBuild = func(ctx context.Context, moduleDir, out string) error {
		builds.Add(1)
		return orig(ctx, moduleDir, out)
	}
	t.Cleanup(func() { goBuild = orig })
	tree := func(says string) string {
		mod := t.TempDir()
		writeTree(t, mod, map[string]string{
			"go.mod":  "module example.com/m\n\ngo 1.22\n",
			"main.go": "package main\n\nimport \"fmt\"\n\nvar tag = \"untagged\"\n\nfunc main() { fmt.Print(tag, \" " + says + "\") }\n",
			"tag.go":  "//go:build verbs\n\npackage main\n\nfunc init() { tag = \"verbs\" }\n",
		})
		return mod
	}
	a, b := tree("a"), tree("b")
	cache := filepath.Join(t.TempDir(), "cache")
	mods := []string{a, a, b, b}
	paths := make([]string, len(mods))
	errs := make([]error, len(mods))
	var wg sync.WaitGroup
	for i, mod := range mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = EnsureBinary(context.Background(), mod, cache)
		}()
	}
	wg.Wait()
	for i, mod := range mods {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		want := "verbs a"
		if mod == b {
			want = "verbs b"
		}
		if out, err := exec.Command(paths[i]).Output(); err != nil || string(out) != want {
			t.Errorf("caller %d: %s says %q (%v), want %q", i, paths[i], out, err, want)
		}
	}
	if paths[0] != paths[1] || paths[2] != paths[3] || paths[0] == paths[2] {
		t.Errorf("paths %v: want one per source tree", paths)
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("%d builds for 2 source trees", n)
	}
}
