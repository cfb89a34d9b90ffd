package verbs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
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

func withHeader(t *testing.T, present bool) {
	t.Helper()
	orig := verbsHeader
	verbsHeader = filepath.Join(t.TempDir(), "verbs.h")
	if present {
		if err := os.WriteFile(verbsHeader, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { verbsHeader = orig })
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
	left, _ := filepath.Glob(filepath.Join(cache, "*"))
	if len(left) != 1 || left[0] != p3 {
		t.Errorf("cache holds %v, want only %s", left, p3)
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
	if left, _ := os.ReadDir(cache); len(left) != 0 {
		t.Errorf("cache holds %v after a failed build", left)
	}
}

func TestEnsureBinaryWithoutHeaders(t *testing.T) {
	withHeader(t, false)
	builds := fakeBuild(t)
	_, err := EnsureBinary(context.Background(), t.TempDir(), t.TempDir())
	if err == nil || err.Error() != "libibverbs-dev is not installed: apt-get install libibverbs-dev" {
		t.Fatalf("got %v", err)
	}
	if *builds != 0 {
		t.Error("built without headers")
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

func TestIsIPv4Mapped(t *testing.T) {
	for _, tc := range []struct {
		gid  string
		want bool
	}{
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"fe80::200:ff:fe00:0", false},
		{"::1", false},
		{"2001:db8::ffff:7f00:1", false},
	} {
		var g fabric.GID
		if err := g.UnmarshalText([]byte(tc.gid)); err != nil {
			t.Fatal(err)
		}
		if got := isIPv4Mapped(g); got != tc.want {
			t.Errorf("%s: %v", tc.gid, got)
		}
	}
}

func TestParseSysfsGID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0000:0000:0000:0000:0000:ffff:7f00:0001\n", "::ffff:127.0.0.1", true},
		{"fe80:0000:0000:0000:0200:00ff:fe00:0000\n", "fe80::200:ff:fe00:0", true},
		{"0000:0000:0000:0000:0000:0000:0000:0000\n", "", false},
		{"garbage", "", false},
	} {
		g, ok := parseSysfsGID(tc.in)
		if ok != tc.ok || (ok && g.String() != tc.want) {
			t.Errorf("%q: %s %v", tc.in, g, ok)
		}
	}
}

func TestStubOrReal(t *testing.T) {
	p := New()
	if p.Name() != "verbs" || p.Simulated() {
		t.Errorf("provider %s simulated=%v", p.Name(), p.Simulated())
	}
	if !Supported() {
		if _, err := p.Devices(); err == nil {
			t.Error("stub lists devices")
		}
	}
}
