package softroce

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// libResolver finds shared libraries the way ld.so would for the binaries we
// ship: RUNPATH/RPATH, then the ld.so.conf directories, then the defaults.
// Parsing ELF instead of running ldd keeps untrusted binaries from being
// executed on the host and works on a fixture tree in tests.
type libResolver struct {
	root string   // filesystem root, "/" on a real host
	dirs []string // search dirs, absolute inside root
}

func newLibResolver(root string) *libResolver {
	r := &libResolver{root: root}
	r.dirs = append(r.dirs, r.ldSoConf("/etc/ld.so.conf", 0)...)
	r.dirs = append(r.dirs, "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	return r
}

func (r *libResolver) host(p string) string { return filepath.Join(r.root, p) }

func (r *libResolver) ldSoConf(p string, depth int) []string {
	if depth > 8 {
		return nil
	}
	f, err := os.Open(r.host(p))
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "include "):
			pat := strings.TrimSpace(strings.TrimPrefix(line, "include "))
			if !filepath.IsAbs(pat) {
				pat = filepath.Join(filepath.Dir(p), pat)
			}
			matches, _ := filepath.Glob(r.host(pat))
			for _, m := range matches {
				rel, _ := filepath.Rel(r.root, m)
				dirs = append(dirs, r.ldSoConf("/"+rel, depth+1)...)
			}
		default:
			dirs = append(dirs, line)
		}
	}
	return dirs
}

// closure returns the absolute (guest = host) paths of the ELF interpreter
// and every shared library reachable from bins, bins excluded. A statically
// linked binary contributes nothing.
func (r *libResolver) closure(bins []string) ([]string, error) {
	return r.closureFrom(bins, r.host)
}

// closureFrom is closure with the first-level binaries read through open,
// which lets the /init binary live outside root (a test binary next to a
// fixture tree) while its libraries are still looked up inside root.
func (r *libResolver) closureFrom(bins []string, open func(string) string) ([]string, error) {
	seen := map[string]bool{}
	top := map[string]bool{}
	for _, b := range bins {
		top[b] = true
	}
	var out []string
	var walk func(p string) error
	walk = func(p string) error {
		hp := r.host(p)
		if top[p] {
			hp = open(p)
		}
		f, err := elf.Open(hp)
		if err != nil {
			return fmt.Errorf("read ELF %s: %w", p, err)
		}
		defer f.Close()
		if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
			return fmt.Errorf("%s is not an x86-64 ELF file", p)
		}
		var next []string
		for _, pr := range f.Progs {
			if pr.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, pr.Filesz)
			if _, err := pr.ReadAt(b, 0); err != nil {
				return fmt.Errorf("read interpreter of %s: %w", p, err)
			}
			next = append(next, strings.TrimRight(string(b), "\x00"))
		}
		needed, err := f.ImportedLibraries()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return fmt.Errorf("read DT_NEEDED of %s: %w", p, err)
		}
		var runpath []string
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			vals, _ := f.DynString(tag)
			for _, v := range vals {
				for _, d := range strings.Split(v, ":") {
					runpath = append(runpath, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(p)))
				}
			}
		}
		for _, lib := range needed {
			lp, err := r.find(lib, runpath)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			next = append(next, lp)
		}
		for _, n := range next {
			if seen[n] {
				continue
			}
			seen[n] = true
			out = append(out, n)
			if err := walk(n); err != nil {
				return err
			}
		}
		return nil
	}
	for _, b := range bins {
		seen[b] = true
	}
	for _, b := range bins {
		if err := walk(b); err != nil {
			return nil, err
		}
	}
	// glibc dlopens libgcc_s.so.1 to unwind a thread in pthread_exit and
	// pthread_cancel ("libgcc_s.so.1 must be installed for pthread_exit to
	// work", then abort): no DT_NEEDED names it, yet a threaded C server
	// such as rping dies without it.
	for _, l := range out {
		if filepath.Base(l) != "libc.so.6" {
			continue
		}
		gcc, err := r.find("libgcc_s.so.1", nil)
		if err != nil || seen[gcc] {
			break // a host without it cannot ship it; the program says so
		}
		seen[gcc] = true
		out = append(out, gcc)
		if err := walk(gcc); err != nil {
			return nil, err
		}
		break
	}
	return out, nil
}

func (r *libResolver) find(lib string, runpath []string) (string, error) {
	if strings.Contains(lib, "/") {
		return lib, nil
	}
	for _, d := range append(runpath, r.dirs...) {
		p := filepath.Join(d, lib)
		if fi, err := os.Stat(r.host(p)); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("shared library %s not found (searched %s)", lib, strings.Join(r.dirs, ":"))
}
