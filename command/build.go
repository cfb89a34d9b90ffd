package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/filelock"
)

// Builder runs a build command once per distinct input: a server whose
// capacity is compiled in (`-DMAX_CLIENTS={n}`) is rebuilt for each N,
// but not for each trial, nor again in a later run.
//
// The cache key is the argv template expanded with every placeholder
// but {build}, and the content of what the build reads. What it reads is
// taken to be the arguments that name existing files or directories
// (also the value of a NAME=VALUE argument, as make takes them), plus
// Inputs: a directory counts with everything under it.
type Builder struct {
	// Argv is the build's argv template; {build} is its output
	// directory.
	Argv []string
	// Dir is the cache root; each build gets Dir/<key>.
	Dir string
	// Inputs are more files or directories the build reads.
	Inputs []string
	// Timeout bounds one build; default 10 minutes.
	Timeout time.Duration
	// Env is added to the build's environment.
	Env []string
}

// Built is a build's result.
type Built struct {
	// Dir is the output directory ({build}).
	Dir string `json:"dir"`
	Key string `json:"key"`
	// Argv is the command as run.
	Argv []string `json:"argv"`
	// Inputs are the paths hashed into the key.
	Inputs []string `json:"inputs"`
	// Cached is set when an earlier build was reused.
	Cached   bool          `json:"cached"`
	Duration time.Duration `json:"duration_ns"`
	// Tail is the end of the build's output.
	Tail string `json:"tail,omitempty"`
}

// BuildError is a build that failed: a point failure, with what the
// build printed last.
type BuildError struct {
	Argv []string
	Exit Exit
	Err  error // a start error or timeout, else nil
	Tail string
}

func (e *BuildError) Error() string {
	how := e.Exit.String()
	if e.Err != nil {
		how = e.Err.Error()
	}
	msg := fmt.Sprintf("build %s failed (%s)", strings.Join(e.Argv, " "), how)
	if l := LastLines(e.Tail, 3); l != "" {
		msg += ": " + l
	}
	return msg
}

const buildMarker = ".rdmaprobe-build.json"

// Ensure returns the build for vars (which must not set "build"),
// running it unless an identical one is cached. Concurrent callers, in
// this process or others, build a key once: the first holds a lock on
// Dir/<key>.lock, the rest wait and reuse its result.
func (b *Builder) Ensure(ctx context.Context, vars map[string]string) (Built, error) {
	if _, ok := vars["build"]; ok {
		return Built{}, errors.New("build: {build} is set by the builder")
	}
	keyVars := map[string]string{"build": "{build}"}
	for k, v := range vars {
		keyVars[k] = v
	}
	keyArgv, err := Expand(b.Argv, keyVars)
	if err != nil {
		return Built{}, fmt.Errorf("--server-build: %w", err)
	}
	inputs := b.inputs(keyArgv)
	key, err := b.key(keyArgv, inputs)
	if err != nil {
		return Built{}, err
	}
	if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return Built{}, fmt.Errorf("build cache: %w", err)
	}
	out := filepath.Join(b.Dir, key)
	unlock, err := filelock.Lock(ctx, out+".lock", false)
	if err != nil {
		return Built{}, fmt.Errorf("build cache: %w", err)
	}
	defer unlock()

	if prev, ok := readMarker(out); ok {
		prev.Cached = true
		return prev, nil
	}
	// An output directory without its marker is a build that did not
	// finish: start over.
	os.RemoveAll(out)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Built{}, fmt.Errorf("build cache: %w", err)
	}
	vars2 := map[string]string{"build": out}
	for k, v := range vars {
		vars2[k] = v
	}
	argv, err := Expand(b.Argv, vars2)
	if err != nil {
		return Built{}, err
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := Start(Spec{Argv: argv, Env: b.Env, TailBytes: 8192})
	if err != nil {
		os.RemoveAll(out)
		return Built{}, &BuildError{Argv: argv, Exit: Exit{Code: -1}, Err: err}
	}
	exit, werr := p.Wait(bctx)
	res := Built{Dir: out, Key: key, Argv: argv, Inputs: inputs, Duration: exit.Duration, Tail: p.Tail()}
	if werr != nil || exit.Code != 0 || exit.Signal != "" {
		os.RemoveAll(out)
		if werr != nil {
			werr = fmt.Errorf("stopped after %v: %w", exit.Duration.Round(time.Millisecond), werr)
		}
		return res, &BuildError{Argv: argv, Exit: exit, Err: werr, Tail: res.Tail}
	}
	data, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, buildMarker), data, 0o644); err != nil {
		return res, fmt.Errorf("build cache: %w", err)
	}
	return res, nil
}

func readMarker(dir string) (Built, bool) {
	data, err := os.ReadFile(filepath.Join(dir, buildMarker))
	if err != nil {
		return Built{}, false
	}
	var b Built
	if json.Unmarshal(data, &b) != nil || b.Dir != dir {
		return Built{}, false
	}
	return b, true
}

// inputs lists the existing paths the build names, absolute, sorted.
func (b *Builder) inputs(argv []string) []string {
	seen := map[string]bool{}
	add := func(p string) {
		if p == "" || strings.Contains(p, "{build}") {
			return
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return
		}
		if _, err := os.Stat(abs); err == nil {
			seen[abs] = true
		}
	}
	for _, a := range argv[1:] {
		add(a)
		if _, v, ok := strings.Cut(a, "="); ok {
			add(v)
		}
	}
	for _, in := range b.Inputs {
		add(in)
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// key hashes the command and the content of every input file (names
// relative to their input, modes, bytes). The cache itself is skipped
// should it lie inside an input directory.
func (b *Builder) key(argv, inputs []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "rdmaprobe-build-v1\n%d\n", len(argv))
	for _, a := range argv {
		fmt.Fprintf(h, "%d:%s\n", len(a), a)
	}
	cache, _ := filepath.Abs(b.Dir)
	for _, in := range inputs {
		fmt.Fprintf(h, "input %s\n", in)
		err := filepath.WalkDir(in, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p == cache {
				return filepath.SkipDir
			}
			rel, _ := filepath.Rel(in, p)
			info, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %v\n", rel, info.Mode())
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				t, _ := os.Readlink(p)
				fmt.Fprintf(h, "-> %s\n", t)
			case d.Type().IsRegular():
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				n, err := io.Copy(h, f)
				f.Close()
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "\n%d\n", n)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("build input %s: %w", in, err)
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return sum[:24], nil
}

// Vars returns the placeholder values common to a point's commands.
func Vars(n, max, port int, dir string) map[string]string {
	return map[string]string{
		"n":    strconv.Itoa(n),
		"max":  strconv.Itoa(max),
		"port": strconv.Itoa(port),
		"dir":  dir,
	}
}

// HashTree returns the SHA-256 of every regular file under dir, by
// path relative to it (the build's own marker left out).
func HashTree(dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".rdmaprobe-") {
			return nil
		}
		if sum, err := FileSHA256(p); err == nil {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = sum
		}
		return nil
	})
	return out
}

// FileSHA256 is the hex SHA-256 of a file's content.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
