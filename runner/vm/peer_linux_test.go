package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// TestBootPairStalls checks that bootPair boots a --vm-peer pair again on
// a new link when a boot of it stalls, and only then: the pair comes up
// after one stalled boot, with the stall in both console logs; a pair
// whose every boot stalls fails after softroce.BootAttempts attempts,
// naming each stall; a boot that fails otherwise is not retried. Every
// QEMU started is reaped each time. A QEMU started with -S never runs
// its vCPUs (nothing here sends "cont"): a guest as silent as the TCG
// hang CI saw.
func TestBootPairStalls(t *testing.T) {
	if ok, why := softroce.Available(); !ok {
		parts.Missing(t, "vm backend unavailable: %s", why)
	}
	if err := peerPackages(); err != nil {
		parts.Missing(t, "%v", err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	exe, err := verbsbin.Path(ctx)
	if err != nil {
		t.Fatal(err)
	}
	img, err := softroce.BuildImage(ctx, softroce.ImageConfig{Binary: exe,
		ExtraBinaries: append(append([]string(nil), softroce.DefaultExtraBinaries...), peerBinaries...)})
	if err != nil {
		t.Fatal(err)
	}
	// The wrapper records each QEMU's PID (exec keeps it) and runs the
	// first `paused` of them paused, or, with paused < 0, fails every
	// one. The two guests of a pair start at once: the lock makes the
	// count of those before exact.
	wrapper := func(paused int) (path, pids string) {
		dir := t.TempDir()
		path, pids = filepath.Join(dir, "qemu"), filepath.Join(dir, "pids")
		script := fmt.Sprintf(`#!/bin/sh
if [ %[2]d -lt 0 ]; then echo $$ >> %[1]s; echo "wrapper: no QEMU" >&2; exit 1; fi
exec 9>>%[1]s.lock
flock 9
echo $$ >> %[1]s
n=$(wc -l < %[1]s)
exec 9>&-
if [ "$n" -le %[2]d ]; then exec %[3]s "$@" -S; fi
exec %[3]s "$@"
`, pids, paused, qemu)
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return path, pids
	}
	reaped := func(t *testing.T, pids string) int {
		b, err := os.ReadFile(pids)
		if err != nil {
			t.Fatal(err)
		}
		list := strings.Fields(string(b))
		for _, p := range list {
			pid, _ := strconv.Atoi(p)
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("QEMU pid %d still exists (kill 0: %v)", pid, err)
			}
		}
		return len(list)
	}
	cfg := softroce.BootConfig{CPUs: 1, MemMiB: 1024}

	t.Run("retried", func(t *testing.T) {
		q, pids := wrapper(1)
		dir := t.TempDir()
		c := cfg
		// The second attempt's boots must not stall: 5 s, since a boot's
		// longest silence (0.3 s on a quiet host) passed 3 s on a loaded
		// one; a further stall would only add an attempt.
		c.QEMU, c.StallTimeout, c.LogPath = q, 5*time.Second, filepath.Join(dir, "first.log")
		peerLog := filepath.Join(dir, "peer.log")
		t0 := time.Now()
		a, p, err := bootPair(ctx, img, c, peerLog)
		if err != nil {
			t.Fatalf("pair after a stall: %v", err)
		}
		t.Logf("pair up in %v, stalls: first %d, peer %d", time.Since(t0).Round(time.Millisecond), a.Stalls, p.g.Stalls)
		if a.Stalls+p.g.Stalls < 1 {
			t.Errorf("Stalls = %d and %d, want one stall in all at least", a.Stalls, p.g.Stalls)
		}
		// bootPair returned once the peer's sshd listened; both guests
		// still answer.
		for _, g := range []*softroce.Guest{a, p.g} {
			if _, err := g.Info(ctx); err != nil {
				t.Errorf("guest unusable after the retry: %v", err)
			}
		}
		if err := p.close(); err != nil {
			t.Errorf("close peer: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Errorf("close first guest: %v", err)
		}
		// Each retry is noted in both logs; the consoles of every boot
		// stay there.
		attempts := 0
		for _, log := range []string{c.LogPath, peerLog} {
			b, _ := os.ReadFile(log)
			s := string(b)
			n := strings.Count(s, "; starting both guests once more")
			if attempts == 0 {
				attempts = n + 1
			}
			if n < 1 || n+1 != attempts || !strings.Contains(s, "guest stalled before ready: console silent for 5s") ||
				!strings.Contains(s[strings.LastIndex(s, "once more"):], "Linux version") {
				t.Errorf("console log %s does not tell the stall and the next boot:\n%s", filepath.Base(log), s)
			}
		}
		if n := reaped(t, pids); n != 2*attempts {
			t.Errorf("%d QEMUs started, want %d (two for each of %d attempts)", n, 2*attempts, attempts)
		}
	})

	t.Run("every-attempt", func(t *testing.T) {
		q, pids := wrapper(2 * softroce.BootAttempts)
		c := cfg
		c.QEMU, c.StallTimeout = q, 2*time.Second
		a, p, err := bootPair(ctx, img, c, "")
		if err == nil {
			p.close()
			a.Close()
			t.Fatal("every boot stalled but bootPair returned the guests")
		}
		t.Logf("bootPair: %v", err)
		// Both guests stall in each attempt.
		if !errors.Is(err, softroce.ErrStalled) || strings.Count(err.Error(), "console silent for 2s") != 2*softroce.BootAttempts {
			t.Errorf("err = %v, want both guests' stalls of all %d attempts named", err, softroce.BootAttempts)
		}
		if n := reaped(t, pids); n != 2*softroce.BootAttempts {
			t.Errorf("%d QEMUs started, want %d", n, 2*softroce.BootAttempts)
		}
	})

	t.Run("other-error", func(t *testing.T) {
		q, pids := wrapper(-1)
		c := cfg
		c.QEMU = q
		a, p, err := bootPair(ctx, img, c, "")
		if err == nil {
			p.close()
			a.Close()
			t.Fatal("no QEMU ran but bootPair returned the guests")
		}
		if errors.Is(err, softroce.ErrStalled) || !strings.Contains(err.Error(), "wrapper: no QEMU") {
			t.Errorf("err = %v, want QEMU's failure", err)
		}
		if n := reaped(t, pids); n != 2 {
			t.Errorf("%d QEMUs started, want 2: a failure that is no stall is not retried", n)
		}
	})
}
