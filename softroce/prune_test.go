package softroce

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// Images unused for a day go; beyond the 8 most recently used, so do
// those unused for an hour; one used within the hour stays whatever its
// rank; a temporary file of an interrupted build goes after an hour;
// other files in the cache are not touched.
func TestPruneImages(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	put := func(name string, idle time.Duration) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-idle)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	// 12 images used 1..12 minutes ago: ranks 9-12 are within the hour.
	for i := 1; i <= 12; i++ {
		put(fmt.Sprintf("initramfs-recent%02d.cpio", i), time.Duration(i)*time.Minute)
	}
	// 3 used 2-4 hours ago (ranks 13-15): beyond the 8, unused an hour.
	for i := 2; i <= 4; i++ {
		put(fmt.Sprintf("initramfs-hours%d.cpio", i), time.Duration(i)*time.Hour)
	}
	put("initramfs-old.cpio", 25*time.Hour)
	put(".initramfs-123", 2*time.Hour)
	put(".initramfs-456", time.Minute)
	put("vmlinux-abc", 30*24*time.Hour)
	put("rdmaprobe-verbs-0123", 30*24*time.Hour)

	pruneImages(dir, now)
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	sort.Strings(left)
	var want []string
	for i := 1; i <= 12; i++ {
		want = append(want, fmt.Sprintf("initramfs-recent%02d.cpio", i))
	}
	want = append(want, ".initramfs-456", "rdmaprobe-verbs-0123", "vmlinux-abc")
	sort.Strings(want)
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("left %v\nwant %v", left, want)
	}

	// With few images, an old one within the day stays.
	dir2 := t.TempDir()
	dir = dir2
	put("initramfs-a.cpio", 3*time.Hour)
	put("initramfs-b.cpio", 23*time.Hour)
	pruneImages(dir2, now)
	if entries, _ := os.ReadDir(dir2); len(entries) != 2 {
		t.Errorf("two images within the day, %d left", len(entries))
	}
}
