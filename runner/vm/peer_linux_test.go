package vm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
	"github.com/rdmaprobe/rdmaprobe/internal/qemuwrap"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// TestBootPairStalls checks that bootPair boots a --vm-peer pair again on
// a new link when a boot of it stalls, and only then: the pair comes up
// after one stalled boot, with the stall in both console logs; a pair
// whose every boot stalls fails after softroce.BootAttempts attempts,
// naming each stall; a boot that fails otherwise is not retried. Every
// QEMU started is reaped each time (qemuwrap pauses the stalled ones).
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
	cfg := softroce.BootConfig{CPUs: 1, MemMiB: 1024}

	t.Run("retried", func(t *testing.T) {
		w := qemuwrap.New(t, qemu, 1)
		dir := t.TempDir()
		c := cfg
		// The second attempt's boots must not stall: 5 s, since a boot's
		// longest silence (0.3 s on a quiet host) passed 3 s on a loaded
		// one; a further stall would only add an attempt.
		c.QEMU, c.StallTimeout, c.LogPath = w.Path, 5*time.Second, filepath.Join(dir, "first.log")
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
		if n := len(w.Reaped(t)); n != 2*attempts {
			t.Errorf("%d QEMUs started, want %d (two for each of %d attempts)", n, 2*attempts, attempts)
		}
	})

	t.Run("every-attempt", func(t *testing.T) {
		w := qemuwrap.New(t, qemu, 2*softroce.BootAttempts)
		c := cfg
		c.QEMU, c.StallTimeout = w.Path, 2*time.Second
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
		if n := len(w.Reaped(t)); n != 2*softroce.BootAttempts {
			t.Errorf("%d QEMUs started, want %d", n, 2*softroce.BootAttempts)
		}
	})

	t.Run("other-error", func(t *testing.T) {
		w := qemuwrap.New(t, qemu, -1)
		c := cfg
		c.QEMU = w.Path
		a, p, err := bootPair(ctx, img, c, "")
		if err == nil {
			p.close()
			a.Close()
			t.Fatal("no QEMU ran but bootPair returned the guests")
		}
		if errors.Is(err, softroce.ErrStalled) || !strings.Contains(err.Error(), "wrapper: no QEMU") {
			t.Errorf("err = %v, want QEMU's failure", err)
		}
		if n := len(w.Reaped(t)); n != 2 {
			t.Errorf("%d QEMUs started, want 2: a failure that is no stall is not retried", n)
		}
	})
}
