package softroce

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ImageConfig says what goes into the guest's initramfs.
type ImageConfig struct {
	// Binary is the Go program that becomes the guest's /init; it must call
	// GuestMain when IsGuest reports true.
	Binary string
	// KernelRelease selects /boot/vmlinuz-<release> and
	// /lib/modules/<release>; empty means the newest release that has
	// rdma_rxe.ko.
	KernelRelease string
	// ExtraBinaries are host programs (paths or names found in $PATH) that
	// are copied to the same path in the guest with their shared libraries
	// (a script brings its #! interpreter).
	ExtraBinaries []string
	// ExtraDirs are host directories copied whole to the same path in the
	// guest (a target's certificates, configs, its own binaries); the
	// programs in them bring their shared libraries too.
	ExtraDirs []string
	// CacheDir holds built images keyed by the hash of their inputs;
	// empty means $XDG_CACHE_HOME/rdmaprobe or ~/.cache/rdmaprobe.
	CacheDir string
}

// Image is a bootable kernel + initramfs pair.
type Image struct {
	// Kernel is what QEMU boots: an uncompressed vmlinux extracted from
	// Bzimage when possible (see pvhKernel), else Bzimage itself.
	Kernel        string
	Bzimage       string
	KernelNote    string
	Initrd        string
	KernelRelease string
	// Modules are the guest paths of the kernel modules, in load order.
	Modules []string
	// Cached reports that Initrd came from the cache unchanged.
	Cached bool
}

// imageFormat changes whenever the layout written below changes, so old
// cache entries are not reused by a newer builder.
const imageFormat = "rdmaprobe-initramfs-v2"

// guestModuleList is where the guest finds its module load order.
const guestModuleList = "/etc/rdmaprobe/modules"

// DefaultExtraBinaries are the reference and inspection tools the vm
// backend expects inside the guest.
var DefaultExtraBinaries = []string{"ibv_devinfo", "ibv_rc_pingpong", "ib_write_lat", "ib_send_lat", "ib_send_bw",
	"ib_write_bw", "ib_read_lat", "ib_read_bw", "rdma"}

// hostRoot is "/" except in tests, which build images from fixture trees.
var hostRoot = "/"

// BuildImage assembles (or finds in the cache) an initramfs for cfg.
func BuildImage(ctx context.Context, cfg ImageConfig) (Image, error) {
	if cfg.Binary == "" {
		return Image{}, errors.New("softroce: ImageConfig.Binary is empty")
	}
	rel := cfg.KernelRelease
	if rel == "" {
		var err error
		if rel, err = newestRxeKernel(hostRoot); err != nil {
			return Image{}, err
		}
	}
	kernel := filepath.Join(hostRoot, "boot", "vmlinuz-"+rel)
	if _, err := os.Stat(kernel); err != nil {
		return Image{}, fmt.Errorf("kernel image %s missing: install the Debian package linux-image-amd64", kernel)
	}
	if f, err := os.Open(kernel); err != nil {
		return Image{}, fmt.Errorf("kernel image %s is not readable (%v): run as root or make it readable", kernel, err)
	} else {
		f.Close()
	}
	p, mods, err := planImage(cfg, rel)
	if err != nil {
		return Image{}, err
	}
	if err := ctx.Err(); err != nil {
		return Image{}, err
	}
	key, err := p.hash()
	if err != nil {
		return Image{}, err
	}
	dir := cfg.CacheDir
	if dir == "" {
		if dir, err = defaultCacheDir(); err != nil {
			return Image{}, err
		}
	}
	img := Image{
		Kernel:        kernel,
		Bzimage:       kernel,
		Initrd:        filepath.Join(dir, "initramfs-"+key[:24]+".cpio"),
		KernelRelease: rel,
		Modules:       mods,
	}
	if pvh, why := pvhKernel(kernel, dir); pvh != "" {
		img.Kernel = pvh
	} else {
		img.KernelNote = "booting the bzImage, slower under TCG: " + why
	}
	if fi, err := os.Stat(img.Initrd); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		img.Cached = true
		now := time.Now()
		os.Chtimes(img.Initrd, now, now) // used: pruneImages keeps it
		return img, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, fmt.Errorf("create cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".initramfs-*")
	if err != nil {
		return Image{}, fmt.Errorf("create initramfs: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := p.write(tmp, false); err != nil {
		tmp.Close()
		return Image{}, fmt.Errorf("write initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Image{}, fmt.Errorf("write initramfs: %w", err)
	}
	// Rename last so a concurrent or interrupted build never leaves a
	// half-written file under the cache key.
	os.Chmod(tmp.Name(), 0o644)
	if err := os.Rename(tmp.Name(), img.Initrd); err != nil {
		return Image{}, fmt.Errorf("store initramfs: %w", err)
	}
	pruneImages(dir, time.Now())
	return img, nil
}

// Cached images are pruned when a new one is stored: every rdmaprobe
// binary (and every change to what goes into the guest) has an image of
// its own, about 45 MB, and a day of development left 177 of them (8
// GB). A use marks its image (the modification time), and QEMU reads the
// image once, at boot.
const (
	// keepImages is how many of the most recently used images stay
	// however old they are, up to imageMaxUnused.
	keepImages = 8
	// imageInUse protects an image used this recently whatever its rank:
	// far longer than a process holds a path before QEMU reads it.
	imageInUse = time.Hour
	// imageMaxUnused is how long an image may go unused at all.
	imageMaxUnused = 24 * time.Hour
)

// pruneImages removes from dir the images unused for imageMaxUnused, and
// beyond the keepImages most recently used those unused for imageInUse;
// also what an interrupted build left (a temporary file older than
// imageInUse). Errors are ignored: a prune that fails leaves a file.
func pruneImages(dir string, now time.Time) {
	type image struct {
		path string
		used time.Time
	}
	var imgs []image
	paths, _ := filepath.Glob(filepath.Join(dir, "initramfs-*.cpio"))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			imgs = append(imgs, image{p, fi.ModTime()})
		}
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].used.After(imgs[j].used) })
	for i, img := range imgs {
		idle := now.Sub(img.used)
		if idle > imageMaxUnused || (i >= keepImages && idle > imageInUse) {
			os.Remove(img.path)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, ".initramfs-*"))
	for _, p := range tmps {
		if fi, err := os.Stat(p); err == nil && now.Sub(fi.ModTime()) > imageInUse {
			os.Remove(p)
		}
	}
}

func defaultCacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "rdmaprobe"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache dir: set ImageConfig.CacheDir or $XDG_CACHE_HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "rdmaprobe"), nil
}

// newestRxeKernel picks the highest release that has both a kernel image
// and rdma_rxe, so a half-installed newer kernel is skipped.
func newestRxeKernel(root string) (string, error) {
	ents, err := os.ReadDir(filepath.Join(root, "lib", "modules"))
	if err != nil {
		return "", errors.New("no kernel modules under /lib/modules: install the Debian package linux-image-amd64")
	}
	var rels []string
	for _, e := range ents {
		rel := e.Name()
		if _, err := os.Stat(filepath.Join(root, "boot", "vmlinuz-"+rel)); err != nil {
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(root, "lib", "modules", rel, "kernel", "drivers", "infiniband", "sw", "rxe", "rdma_rxe.ko*")); len(m) == 0 {
			continue
		}
		rels = append(rels, rel)
	}
	if len(rels) == 0 {
		return "", errors.New("no kernel with rdma_rxe.ko and /boot/vmlinuz-*: install the Debian package linux-image-amd64")
	}
	sort.Slice(rels, func(i, j int) bool { return versionLess(rels[i], rels[j]) })
	return rels[len(rels)-1], nil
}

// versionLess compares dotted/dashed releases numerically where it can
// (6.1.0-10 < 6.1.0-56 < 6.10.0-1).
func versionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '+' || r == '~' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			if na != nb {
				return na < nb
			}
			continue
		}
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}

// planEntry is one file of the image: either copied from the host (src) or
// given inline (data).
type planEntry struct {
	mode         uint32
	src          string
	data         []byte
	rdevMj, rdMn uint32
}

type plan struct {
	root    string
	entries map[string]*planEntry // guest path → entry
}

func newPlan(root string) *plan { return &plan{root: root, entries: map[string]*planEntry{}} }

func (p *plan) dir(g string) {
	for d := g; d != "/" && d != "."; d = path.Dir(d) {
		if _, ok := p.entries[d]; !ok {
			p.entries[d] = &planEntry{mode: cpioDir | 0o755}
		}
	}
}

func (p *plan) inline(g string, mode uint32, data []byte) {
	p.dir(path.Dir(g))
	p.entries[g] = &planEntry{mode: mode, data: data}
}

// hostPath adds g exactly as the host has it: symlinked directories such as
// Debian's /lib → usr/lib become symlinks in the guest too, so the ELF
// interpreter path and library paths resolve the same way they do on the
// host.
func (p *plan) hostPath(g string) error {
	return p.hostPathDepth(path.Clean(g), 0)
}

func (p *plan) hostPathDepth(g string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("too many symlinks resolving %s", g)
	}
	parts := strings.Split(strings.TrimPrefix(g, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(p.root, next))
		if err != nil {
			return fmt.Errorf("image input %s: %w", g, err)
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(p.root, next))
			if err != nil {
				return err
			}
			if _, ok := p.entries[next]; !ok {
				p.dir(cur)
				p.entries[next] = &planEntry{mode: cpioSymlink | 0o777, data: []byte(target)}
			}
			abs := target
			if !path.IsAbs(abs) {
				abs = path.Join(cur, target)
			}
			rest := path.Join(append([]string{abs}, parts[i+1:]...)...)
			return p.hostPathDepth(rest, depth+1)
		case fi.IsDir():
			if _, ok := p.entries[next]; !ok {
				p.entries[next] = &planEntry{mode: cpioDir | uint32(fi.Mode().Perm())}
			}
			if last {
				return nil
			}
		case fi.Mode().IsRegular() && last:
			p.entries[next] = &planEntry{mode: cpioReg | uint32(fi.Mode().Perm()), src: filepath.Join(p.root, next)}
			return nil
		default:
			return fmt.Errorf("image input %s: %s is neither a directory, a file nor a symlink", g, next)
		}
		cur = next
	}
	return nil
}

// program adds the file at guest (= host) path g and returns the ELF files
// whose libraries the guest needs: g itself if it is a dynamic ELF
// program or library, the interpreter of a #! script, nothing for data.
func (p *plan) program(g string, depth int) ([]string, error) {
	if depth > 4 {
		return nil, fmt.Errorf("%s: #! interpreters nest too deep", g)
	}
	if err := p.hostPath(g); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(p.root, g))
	if err != nil {
		return nil, err
	}
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	f.Close()
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		// Object files and foreign ELF files travel as data: only what the
		// guest's loader would map needs libraries.
		ef, err := elf.Open(filepath.Join(p.root, g))
		if err != nil {
			return nil, fmt.Errorf("read ELF %s: %w", g, err)
		}
		defer ef.Close()
		if ef.Class != elf.ELFCLASS64 || ef.Machine != elf.EM_X86_64 || (ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN) {
			return nil, nil
		}
		return []string{path.Clean(g)}, nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) == 0 || !path.IsAbs(fields[0]) {
			return nil, fmt.Errorf("%s: #! line names no absolute interpreter", g)
		}
		return p.program(fields[0], depth+1)
	}
	return nil, nil
}

// tree adds every file under host directory d at the same path.
func (p *plan) tree(d string) ([]string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(filepath.Join(p.root, abs))
	if err != nil {
		return nil, fmt.Errorf("extra directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("extra directory %s is not a directory", d)
	}
	var elfs []string
	err = filepath.WalkDir(filepath.Join(p.root, abs), func(hp string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p.root, hp)
		g := "/" + filepath.ToSlash(rel)
		switch {
		case de.IsDir():
			return p.hostPath(g)
		case de.Type()&os.ModeSymlink != 0:
			// Kept as a link; whatever it points to outside the tree
			// is the operator's to name.
			target, err := os.Readlink(hp)
			if err != nil {
				return err
			}
			p.dir(path.Dir(g))
			p.entries[g] = &planEntry{mode: cpioSymlink | 0o777, data: []byte(target)}
			return nil
		case de.Type().IsRegular():
			e, err := p.program(g, 0)
			elfs = append(elfs, e...)
			return err
		}
		return nil // sockets, fifos, devices: not files to ship
	})
	if err != nil {
		return nil, fmt.Errorf("extra directory %s: %w", d, err)
	}
	return elfs, nil
}

// hash covers every byte that ends up in the image, so the cache key is
// the content, not file names or timestamps.
func (p *plan) hash() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", imageFormat)
	for _, g := range sortedKeys(p.entries) {
		e := p.entries[g]
		fmt.Fprintf(h, "%s %o %d %d\n", g, e.mode, e.rdevMj, e.rdMn)
		if e.src != "" {
			f, err := os.Open(e.src)
			if err != nil {
				return "", err
			}
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", fmt.Errorf("hash %s: %w", e.src, err)
			}
			fmt.Fprintf(h, "\n%d\n", n)
		} else {
			h.Write(e.data)
			fmt.Fprintf(h, "\n%d\n", len(e.data))
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (p *plan) write(w io.Writer, compress bool) error {
	var zw *gzip.Writer
	if compress {
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
		w = zw
	}
	cw := newCpioWriter(w)
	// Sorted order puts every directory before its contents.
	for _, g := range sortedKeys(p.entries) {
		e := p.entries[g]
		data := e.data
		if e.src != "" {
			b, err := os.ReadFile(e.src)
			if err != nil {
				return err
			}
			data = b
		}
		if err := cw.add(cpioEntry{name: g, mode: e.mode, data: data, rdevMj: e.rdevMj, rdevMn: e.rdMn}); err != nil {
			return err
		}
	}
	if err := cw.close(); err != nil {
		return err
	}
	if zw != nil {
		return zw.Close()
	}
	return nil
}

func planImage(cfg ImageConfig, rel string) (*plan, []string, error) {
	root := hostRoot
	p := newPlan(root)
	for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/run", "/root", "/mnt"} {
		p.dir(d)
	}
	// The kernel opens /dev/console for /init's stdio before devtmpfs is
	// mounted; the Go runtime needs fds 0–2 open (or /dev/null) to start.
	p.entries["/dev/console"] = &planEntry{mode: cpioChr | 0o600, rdevMj: 5, rdMn: 1}
	p.entries["/dev/null"] = &planEntry{mode: cpioChr | 0o666, rdevMj: 1, rdMn: 3}
	p.entries["/tmp"].mode = cpioDir | 0o1777

	bin, err := filepath.Abs(cfg.Binary)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, fmt.Errorf("guest binary: %w", err)
	}
	p.entries["/init"] = &planEntry{mode: cpioReg | 0o755, src: bin}

	// ELF dependencies are resolved relative to root; the /init binary
	// lives outside it in tests, so resolve it by its own path.
	lr := newLibResolver(root)
	var elfs []string
	for _, b := range cfg.ExtraBinaries {
		hp := b
		if !strings.Contains(b, "/") {
			lp, err := exec.LookPath(b)
			if err != nil {
				return nil, nil, fmt.Errorf("extra binary %s not found in $PATH: %s", b, debianPackageFor(b))
			}
			hp = lp
		}
		e, err := p.program(hp, 0)
		if err != nil {
			return nil, nil, err
		}
		elfs = append(elfs, e...)
	}
	for _, d := range cfg.ExtraDirs {
		e, err := p.tree(d)
		if err != nil {
			return nil, nil, err
		}
		elfs = append(elfs, e...)
	}

	// libibverbs dlopens its provider, so no DT_NEEDED leads to it.
	drv := "/etc/libibverbs.d/rxe.driver"
	if err := p.hostPath(drv); err != nil {
		return nil, nil, fmt.Errorf("%s missing: install the Debian package ibverbs-providers", drv)
	}
	var provider string
	for _, d := range lr.dirs {
		m, _ := filepath.Glob(filepath.Join(root, d, "libibverbs", "librxe-rdmav*.so"))
		if len(m) > 0 {
			provider = "/" + strings.TrimPrefix(strings.TrimPrefix(m[0], filepath.Clean(root)), "/")
			break
		}
	}
	if provider == "" {
		return nil, nil, errors.New("librxe-rdmav*.so missing: install the Debian package ibverbs-providers")
	}
	if err := p.hostPath(provider); err != nil {
		return nil, nil, err
	}
	elfs = append(elfs, provider)

	libs, err := lr.closure(elfs)
	if err != nil {
		return nil, nil, err
	}
	binLibs, err := binaryLibs(lr, bin)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range append(libs, binLibs...) {
		if err := p.hostPath(l); err != nil {
			return nil, nil, err
		}
	}

	mods, err := planModules(p, rel, guestModules)
	if err != nil {
		return nil, nil, err
	}
	p.inline(guestModuleList, cpioReg|0o644, []byte(strings.Join(mods, "\n")+"\n"))
	// The netdev device's modules are in every image (a few hundred KiB)
	// and loaded only when a boot asks for it; the list repeats modules
	// already loaded, which the guest skips.
	nmods, err := planModules(p, rel, netdevModules)
	if err != nil {
		return nil, nil, err
	}
	p.inline(netdevModList, cpioReg|0o644, []byte(strings.Join(nmods, "\n")+"\n"))
	// Likewise the link's NIC driver, loaded only with a link.
	lmods, err := planModules(p, rel, linkModules)
	if err != nil {
		return nil, nil, err
	}
	p.inline(linkModList, cpioReg|0o644, []byte(strings.Join(lmods, "\n")+"\n"))
	// sshd, in a guest that runs one (a load-generator host at the far
	// end of a link), drops privileges to its own user.
	p.inline("/etc/passwd", cpioReg|0o644, []byte("root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"))
	p.inline("/etc/group", cpioReg|0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	p.inline("/etc/hosts", cpioReg|0o644, []byte("127.0.0.1\tlocalhost\n::1\tlocalhost\n"))
	p.inline("/etc/nsswitch.conf", cpioReg|0o644, []byte("hosts: files\n"))
	return p, mods, nil
}

// binaryLibs resolves the /init binary's libraries (a static Go binary has
// none); the binary itself is read from its real path, not under root.
func binaryLibs(lr *libResolver, bin string) ([]string, error) {
	return lr.closureFrom([]string{bin}, func(p string) string { return p })
}

func planModules(p *plan, rel string, roots []string) ([]string, error) {
	modDir := path.Join("/lib/modules", rel)
	host := filepath.Join(p.root, modDir)
	f, err := os.Open(filepath.Join(host, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("%s/modules.dep missing: install the Debian package linux-image-amd64", modDir)
	}
	deps, err := parseModulesDep(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if bf, err := os.Open(filepath.Join(host, "modules.builtin")); err == nil {
		builtin, _ = parseBuiltin(bf)
		bf.Close()
	}
	order, err := deps.loadOrder(roots, builtin)
	if err != nil {
		return nil, err
	}
	var guest []string
	for _, m := range order {
		src := path.Join(modDir, m)
		g, data, err := moduleContent(filepath.Join(p.root, src), src)
		if err != nil {
			return nil, err
		}
		if data == nil {
			if err := p.hostPath(src); err != nil {
				return nil, err
			}
		} else {
			p.dir(path.Dir(g))
			p.inline(g, cpioReg|0o644, data)
		}
		guest = append(guest, g)
	}
	return guest, nil
}

// moduleContent returns the guest path of a module and, when the host's
// copy is compressed, its decompressed bytes: finit_module only takes a
// compressed module if the kernel was built with in-kernel decompression,
// which we do not want to depend on.
func moduleContent(hostFile, guestPath string) (string, []byte, error) {
	var cmd []string
	switch {
	case strings.HasSuffix(guestPath, ".ko"):
		return guestPath, nil, nil
	case strings.HasSuffix(guestPath, ".ko.gz"):
		f, err := os.Open(hostFile)
		if err != nil {
			return "", nil, err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return "", nil, fmt.Errorf("decompress %s: %w", hostFile, err)
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return "", nil, fmt.Errorf("decompress %s: %w", hostFile, err)
		}
		return strings.TrimSuffix(guestPath, ".gz"), b, nil
	case strings.HasSuffix(guestPath, ".ko.xz"):
		cmd = []string{"xz", "-dc", hostFile}
	case strings.HasSuffix(guestPath, ".ko.zst"):
		cmd = []string{"zstd", "-dc", hostFile}
	default:
		return "", nil, fmt.Errorf("kernel module %s: unknown format", hostFile)
	}
	var out, stderr bytes.Buffer
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdout, c.Stderr = &out, &stderr
	if err := c.Run(); err != nil {
		return "", nil, fmt.Errorf("decompress %s with %s: %v: %s (install xz-utils or zstd)", hostFile, cmd[0], err, strings.TrimSpace(stderr.String()))
	}
	return guestPath[:strings.LastIndex(guestPath, ".ko")+3], out.Bytes(), nil
}

func debianPackageFor(bin string) string {
	switch bin {
	case "ibv_devinfo", "ibv_rc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong":
		return "install the Debian package ibverbs-utils"
	case "rdma":
		return "install the Debian package iproute2"
	case "qemu-system-x86_64":
		return "install the Debian package qemu-system-x86"
	}
	if strings.HasPrefix(bin, "ib_") {
		return "install the Debian package perftest"
	}
	return "install the package that provides it"
}
