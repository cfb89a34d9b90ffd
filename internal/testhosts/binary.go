package testhosts

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
)

// Binary returns an rdmaprobe binary (this module's command): what a
// launcher copies to, or finds on, its hosts. A test binary cannot stand
// in for it: started on another host, it would run its tests. It is the
// verbs build that make build makes where the verbs headers are, taken
// from verbsbin's cache (built once for the current sources and shared
// by every test and package that asks); without the headers, a plain
// build into the test's temporary directory.
func Binary(t testing.TB) string {
	t.Helper()
	root := filepath.Join(scriptsDir(), "..")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in $PATH: cannot build rdmaprobe for the hosts")
	}
	out := filepath.Join(t.TempDir(), "rdmaprobe")
	exe, err := verbsbin.EnsureBinary(context.Background(), root, verbsbin.CacheDir())
	if err == nil {
		// Named rdmaprobe, as its processes are known (their comm).
		if err := os.Link(exe, out); err != nil {
			copyFile(t, exe, out)
		}
		return out
	}
	if !errors.Is(err, verbsbin.ErrNoHeaders) {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "build", "-o", out, ".")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build rdmaprobe: %v\n%s", err, b)
	}
	return out
}

// copyFile copies the executable from to the new file to.
func copyFile(t testing.TB, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
