package guestsuites

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// The verbs fabric's tests, the server's hostile-peer and replay tests
// and the rdma_cm clients' tests need a device, which this host lacks:
// build them with the verbs tag and run them inside the Soft-RoCE guest, so CI exercises real libibverbs on
// rxe0 and proves, by the kernel's own resource count, that hostile and
// unauthenticated peers get no QP there either.
func TestGuestSuites(t *testing.T) {
	if ok, why := softroce.Available(); !ok {
		parts.Missing(t, "no Soft-RoCE guest: %s", why)
	}
	for _, h := range []string{"/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"} {
		if _, err := os.Stat(h); err != nil {
			parts.Missing(t, "%s missing: libibverbs-dev and librdmacm-dev (make setup installs them)", h)
		}
	}
	ctx := context.Background()
	// Not under /tmp (the guest mounts a fresh tmpfs there, and a CI
	// checkout may live under /tmp): the user's cache directory.
	mod := verbsbin.ModuleDir()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	// The suites' C fixture, built here and shipped in as the test
	// binaries are.
	capDir := filepath.Join(cache, "rdmaprobe", "guest-tests", "cmcapserver")
	if b, err := exec.Command("make", "-s", "-C", filepath.Join(mod, "testdata", "cmcapserver"), "OUT="+mkdir(t, capDir)).CombinedOutput(); err != nil {
		t.Fatalf("build testdata/cmcapserver: %v\n%s", err, b)
	}
	capServer := filepath.Join(capDir, "cmcapserver")
	suites := []struct {
		pkg, bin string
		args     []string
		mustLog  string
		minPass  int
		mustPass []string // tests that must have run and passed
	}{
		// The fabric conformance suite, which sim also passes, on rxe0.
		{"./fabric/verbs", "verbs", nil, "", 5, []string{"TestConformance", "TestConformance/UDDatagrams"}},
		// -test.short skips the soak, which runs on the host.
		{"./server", "server", []string{"-test.short"}, "fabric: verbs on rxe0", 3, nil},
		// rdma_cm clients against the cmcapserver fixture on the netdev
		// device (rdma_cm resolves no route on lo).
		{"./client/rdmacm", "rdmacm", []string{"-cmcapserver", capServer, "-cm-addr", softroce.NetdevAddr}, "", 4,
			[]string{"TestRxeConnectReject", "TestRxeAddrError", "TestRxeDisconnected", "TestRxeTraffic"}},
	}
	var bins []string
	for i, s := range suites {
		bin, err := guestTestBinary(mod, filepath.Join(cache, "rdmaprobe", "guest-tests"), s.pkg, s.bin)
		if err != nil {
			t.Fatal(err)
		}
		suites[i].bin = bin
		bins = append(bins, bin)
	}
	exe, err := verbsbin.Path(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := softroce.BuildImage(ctx, softroce.ImageConfig{Binary: exe, ExtraBinaries: append(append(bins, capServer), softroce.DefaultExtraBinaries...)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := softroce.Boot(ctx, softroce.BootConfig{Image: img, MemMiB: 2048, Netdev: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, s := range suites {
		res, err := g.Exec(ctx, 5*time.Minute, append([]string{s.bin, "-test.v", "-test.count=1"}, s.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			// Parallel tests interleave: the tail alone may not show what
			// failed, so the failure lines come first and the whole output
			// is kept in a file.
			log := filepath.Join(os.TempDir(), "rdmaprobe-guest-"+filepath.Base(s.bin)+".log")
			os.WriteFile(log, []byte(res.Stdout+res.Stderr), 0o644)
			t.Fatalf("%s tests failed in the guest (exit %d, error %q, timed out %v; whole output in %s):\n%s\n…\n%s\n%s",
				s.pkg, res.ExitCode, res.Error, res.TimedOut, log, failLines(res.Stdout), command.LastLinesJoined(res.Stdout, 60, "\n"), res.Stderr)
		}
		if strings.Contains(res.Stdout, "--- SKIP") && strings.Contains(res.Stdout, "no RDMA device") {
			t.Fatalf("%s tests skipped inside the guest:\n%s", s.pkg, command.LastLinesJoined(res.Stdout, 30, "\n"))
		}
		if s.mustLog != "" && !strings.Contains(res.Stdout, s.mustLog) {
			t.Fatalf("%s tests did not run on the device (no %q):\n%s", s.pkg, s.mustLog, command.LastLinesJoined(res.Stdout, 30, "\n"))
		}
		if testing.Verbose() {
			t.Log(res.Stdout)
		}
		for _, name := range s.mustPass {
			if !strings.Contains(res.Stdout, "--- PASS: "+name+" (") {
				t.Fatalf("%s did not pass in the guest:\n%s", name, command.LastLinesJoined(res.Stdout, 40, "\n"))
			}
		}
		passed := strings.Count(res.Stdout, "--- PASS")
		if passed < s.minPass {
			t.Fatalf("only %d %s tests passed:\n%s", passed, s.pkg, command.LastLinesJoined(res.Stdout, 40, "\n"))
		}
		t.Logf("%s: %d tests passed on rxe0 in %.1f s", s.pkg, passed, res.DurationMS/1000)
	}
}

func mkdir(t *testing.T, dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// guestTestBinary builds pkg's tests with the verbs tag and returns their
// path in dir, named for their content (name-<sha256>.test): concurrent
// runs (several worktrees on one machine) never write each other's
// binary, and an unchanged binary keeps its path, so the guest image
// holding it stays cached. The build goes to a directory of its own and
// is renamed into place. Binaries unused for a day are removed.
func guestTestBinary(mod, dir, pkg, name string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("guest test binaries: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".building-")
	if err != nil {
		return "", fmt.Errorf("guest test binaries: %w", err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, name+".test")
	build := exec.Command("go", "test", "-c", "-tags", "verbs", "-o", out, pkg)
	build.Dir = mod
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s tests: %v\n%s", pkg, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return "", fmt.Errorf("hash %s tests: %w", pkg, err)
	}
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:8])+".test")
	if err := os.Rename(out, path); err != nil {
		return "", fmt.Errorf("guest test binaries: %w", err)
	}
	old, _ := os.ReadDir(dir)
	for _, e := range old {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return path, nil
}

// failLines picks from go test -v output what the failed tests logged:
// their "--- FAIL" lines and every line printed while one of them was
// running (its "=== RUN"/"=== CONT" up to the next "===" marker).
func failLines(out string) string {
	lines := strings.Split(out, "\n")
	failed := map[string]bool{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "---" && f[1] == "FAIL:" {
			failed[f[2]] = true
		}
	}
	var keep []string
	current := ""
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "===" {
			current = f[2]
			continue
		}
		if failed[current] || (len(f) >= 2 && f[0] == "---" && f[1] == "FAIL:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func TestFailLines(t *testing.T) {
	out := `=== RUN   TestA
=== RUN   TestB/x
    b_test.go:9: b failed here
=== CONT  TestA
    a_test.go:3: a only logs
--- PASS: TestA (0.00s)
--- FAIL: TestB (0.01s)
    --- FAIL: TestB/x (0.01s)
FAIL`
	want := "    b_test.go:9: b failed here\n--- FAIL: TestB (0.01s)\n    --- FAIL: TestB/x (0.01s)"
	if got := failLines(out); got != want {
		t.Errorf("failLines:\n%s\nwant:\n%s", got, want)
	}
}
