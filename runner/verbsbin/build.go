package verbsbin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/internal/filelock"
)

// headers are the headers whose presence means cgo can build the verbs
// fabric (libibverbs' and librdmacm's); a variable so tests can point
// them elsewhere.
var headers = []string{"/usr/include/infiniband/verbs.h", "/usr/include/rdma/rdma_cma.h"}

// ErrNoHeaders is returned by EnsureBinary when libibverbs-dev or
// librdmacm-dev is missing.
var ErrNoHeaders = errors.New("libibverbs-dev or librdmacm-dev is not installed: apt-get install libibverbs-dev librdmacm-dev")

// binaryPrefix names cached binaries: <prefix><source hash>.
const binaryPrefix = "rdmaprobe-verbs-"

// goBuild runs the build; tests replace it to count builds.
var goBuild = func(ctx context.Context, moduleDir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "verbs", "-o", out, ".")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build -tags verbs in %s: %v: %s", moduleDir, err, command.LastLinesJoined(stderr.String(), 5, "; "))
	}
	return nil
}

// EnsureBinary returns the path of an rdmaprobe binary built with the verbs
// tag from the module in moduleDir, building it into cacheDir only when no
// binary for the current sources is cached there. The cache key is a hash
// of the module's non-test Go sources (plus cgo C/asm files) and
// go.mod/go.sum, so any edit that can change the binary rebuilds it and
// nothing else does.
//
// Several processes use cacheDir at once (go test runs packages in
// parallel; checkouts and CI jobs share a home), each perhaps with other
// sources. So a binary appears under its name only complete (built under
// a temporary name in cacheDir, then renamed); one process builds at a
// time, and one that waited for another's build of the same binary finds
// it; and nothing another process may be about to run is removed: each
// use marks its binary used (its modification time), and a build prunes
// only binaries unused for a day. Two lock files order this: one held
// for a build, one held shared by a use and exclusively by the pruning.
func EnsureBinary(ctx context.Context, moduleDir, cacheDir string) (string, error) {
	for _, h := range headers {
		if _, err := os.Stat(h); err != nil {
			return "", ErrNoHeaders
		}
	}
	sum, err := SourceHash(moduleDir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cacheDir, binaryPrefix+sum)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("binary cache: %w", err)
	}
	if found, err := use(ctx, cacheDir, path); err != nil {
		return "", err
	} else if found {
		return path, nil
	}
	unlock, err := filelock.Lock(ctx, filepath.Join(cacheDir, buildLock), false)
	if err != nil {
		return "", fmt.Errorf("binary cache: %w", err)
	}
	defer unlock()
	// Another process may have built it while this one waited.
	if found, err := use(ctx, cacheDir, path); err != nil {
		return "", err
	} else if found {
		return path, nil
	}
	tmpDir, err := os.MkdirTemp(cacheDir, buildingPrefix)
	if err != nil {
		return "", fmt.Errorf("binary cache: %w", err)
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "rdmaprobe")
	if err := goBuild(ctx, moduleDir, tmp); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("binary cache: %w", err)
	}
	// Marked used before it appears, so pruning keeps it.
	now := time.Now()
	os.Chtimes(tmp, now, now)
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("binary cache: %w", err)
	}
	if err := prune(ctx, cacheDir, time.Now().Add(-maxUnused)); err != nil {
		return "", err
	}
	return path, nil
}

const (
	// buildLock is held while a binary is built; useLock shared while
	// one is looked up and marked used, exclusively while old ones are
	// pruned.
	buildLock = ".rdmaprobe-verbs.build.lock"
	useLock   = ".rdmaprobe-verbs.lock"
	// buildingPrefix names the temporary directories builds write to.
	buildingPrefix = ".building-"
	// maxUnused is how long a binary may go unused before a build
	// prunes it: far longer than a process holds a path it was given
	// before running it.
	maxUnused = 24 * time.Hour
)

// use reports whether path is a cached binary and, if so, marks it used
// now, so that pruning keeps it.
func use(ctx context.Context, dir, path string) (bool, error) {
	unlock, err := filelock.Lock(ctx, filepath.Join(dir, useLock), true)
	if err != nil {
		return false, fmt.Errorf("binary cache: %w", err)
	}
	defer unlock()
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return false, nil
	}
	now := time.Now()
	os.Chtimes(path, now, now)
	return true, nil
}

// prune removes the binaries last used before cutoff, and what builds
// killed before then left behind.
func prune(ctx context.Context, dir string, cutoff time.Time) error {
	unlock, err := filelock.Lock(ctx, filepath.Join(dir, useLock), false)
	if err != nil {
		return fmt.Errorf("binary cache: %w", err)
	}
	defer unlock()
	for _, pattern := range []string{binaryPrefix + "*", buildingPrefix + "*"} {
		old, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range old {
			if fi, err := os.Stat(p); err == nil && fi.ModTime().Before(cutoff) {
				os.RemoveAll(p)
			}
		}
	}
	return nil
}

// SourceHash is the cache key EnsureBinary uses for moduleDir: the first
// 16 hex digits of a SHA-256 over the relative path and contents of every
// file that goes into the binary: non-test Go files, cgo C/asm files,
// go.mod/go.sum, and every file under a directory whose Go files use
// //go:embed (embedded templates change the binary too).
func SourceHash(moduleDir string) (string, error) {
	var all []string
	embedDirs := map[string]bool{}
	err := filepath.WalkDir(moduleDir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(moduleDir, path)
		if err != nil {
			return err
		}
		if e.IsDir() {
			if rel != "." && skipDir(e.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		all = append(all, rel)
		if buildInput(rel) && strings.HasSuffix(rel, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte("//go:embed")) {
				embedDirs[filepath.Dir(rel)] = true
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash sources in %s: %w", moduleDir, err)
	}
	var files []string
	for _, rel := range all {
		if buildInput(rel) || underAny(rel, embedDirs) {
			files = append(files, rel)
		}
	}
	h := sha256.New()
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(moduleDir, rel))
		if err != nil {
			return "", fmt.Errorf("hash sources in %s: %w", moduleDir, err)
		}
		// Length-prefixing path and content keeps ("ab","c") and ("a","bc")
		// from hashing alike.
		fmt.Fprintf(h, "%d:%s\x00%d\x00", len(rel), filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func underAny(rel string, dirs map[string]bool) bool {
	for dir := filepath.Dir(rel); ; dir = filepath.Dir(dir) {
		if dirs[dir] {
			return true
		}
		if dir == "." {
			return false
		}
	}
}

// skipDir leaves out what the go tool ignores (testdata, _ and . prefixes)
// and saved results, which only grow.
func skipDir(name string) bool {
	return name == "testdata" || name == "results" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

func buildInput(rel string) bool {
	base := filepath.Base(rel)
	if rel == "go.mod" || rel == "go.sum" {
		return true
	}
	if strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") {
		return false
	}
	switch filepath.Ext(base) {
	case ".go":
		return !strings.HasSuffix(base, "_test.go")
	case ".c", ".h", ".s", ".S":
		return true
	}
	return false
}
