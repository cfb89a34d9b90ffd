package softroce

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"
)

// guestModules are the roots the guest loads. crc32_generic is not a hard
// dependency of rdma_rxe (rxe asks the crypto API for "crc32" at run time,
// which would need modprobe in the guest), so it is named explicitly; the
// virtio ones carry the host↔guest channel.
var guestModules = []string{
	"crc32_generic",
	"virtio_pci",
	"virtio_console",
	"rdma_rxe",
}

// moduleDeps is modules.dep: module path (relative to /lib/modules/<rel>)
// → its dependency paths.
type moduleDeps map[string][]string

func parseModulesDep(r io.Reader) (moduleDeps, error) {
	deps := moduleDeps{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("modules.dep: malformed line %q", line)
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, sc.Err()
}

// moduleName turns kernel/net/ipv4/udp_tunnel.ko(.xz) into udp_tunnel; the
// kernel treats '-' and '_' alike in names.
func moduleName(p string) string {
	b := path.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// loadOrder returns the module paths needed for roots, each after all of
// its dependencies, each once. Roots keep their given order where the
// dependency graph allows it.
func (d moduleDeps) loadOrder(roots []string, builtin map[string]bool) ([]string, error) {
	byName := map[string]string{}
	for p := range d {
		byName[moduleName(p)] = p
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(p string) error
	visit = func(p string) error {
		switch state[p] {
		case 1:
			return fmt.Errorf("modules.dep: dependency cycle at %s", p)
		case 2:
			return nil
		}
		state[p] = 1
		for _, dep := range d[p] {
			if _, ok := d[dep]; !ok {
				return fmt.Errorf("modules.dep: %s needs %s, which has no entry", p, dep)
			}
			if err := visit(dep); err != nil {
				return err
			}
		}
		state[p] = 2
		order = append(order, p)
		return nil
	}
	for _, r := range roots {
		name := strings.ReplaceAll(r, "-", "_")
		p, ok := byName[name]
		if !ok {
			if builtin[name] {
				continue
			}
			return nil, fmt.Errorf("kernel module %s not found in modules.dep (is linux-image-amd64 complete?)", r)
		}
		if err := visit(p); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// parseBuiltin reads modules.builtin so roots compiled into the kernel are
// not reported missing.
func parseBuiltin(r io.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out[moduleName(l)] = true
		}
	}
	return out, sc.Err()
}
