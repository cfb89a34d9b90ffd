package softroce

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"syscall"
)

// newc is the only cpio flavour the kernel's initramfs unpacker reads, and
// it needs rdevmajor/rdevminor for /dev/console: without that node the Go
// runtime of /init finds fds 0–2 closed, fails to open /dev/null and dies
// before main. cavaliergopher/cpio cannot write device numbers, hence this
// small writer.
type cpioEntry struct {
	name   string // without leading slash
	mode   uint32 // type and permission bits, as in stat(2)
	data   []byte // file contents or symlink target
	rdevMj uint32
	rdevMn uint32
}

const (
	cpioDir     = syscall.S_IFDIR
	cpioReg     = syscall.S_IFREG
	cpioSymlink = syscall.S_IFLNK
	cpioChr     = syscall.S_IFCHR
)

type cpioWriter struct {
	w     io.Writer
	ino   uint32
	n     int64
	err   error
	names map[string]bool
}

func newCpioWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, ino: 1, names: map[string]bool{}}
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// add writes one entry; a name already written is skipped so callers can
// add shared parents and libraries without bookkeeping.
func (c *cpioWriter) add(e cpioEntry) error {
	name := strings.TrimPrefix(e.name, "/")
	if name == "" || c.names[name] {
		return c.err
	}
	c.names[name] = true
	nlink := 1
	if e.mode&syscall.S_IFMT == cpioDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, e.rdevMj, e.rdevMn, len(name)+1, 0)
	c.ino++
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad()
	c.write(e.data)
	c.pad()
	return c.err
}

// close writes the trailer; the kernel stops unpacking at it.
func (c *cpioWriter) close() error {
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, len("TRAILER!!!")+1, 0)
	c.write([]byte(hdr))
	c.write([]byte("TRAILER!!!\x00"))
	c.pad()
	return c.err
}

// readCpio parses a newc archive; tests use it to check what an image holds.
func readCpio(r io.Reader) ([]cpioEntry, error) {
	var out []cpioEntry
	var off int64
	read := func(n int64) ([]byte, error) {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		off += n
		return b, err
	}
	skipPad := func() error {
		if p := off % 4; p != 0 {
			_, err := read(4 - p)
			return err
		}
		return nil
	}
	for {
		h, err := read(110)
		if err != nil {
			return nil, fmt.Errorf("cpio header at %d: %w", off, err)
		}
		if string(h[:6]) != "070701" {
			return nil, fmt.Errorf("cpio: bad magic %q at %d", h[:6], off-110)
		}
		field := func(i int) uint32 {
			var v uint32
			fmt.Sscanf(string(h[6+8*i:14+8*i]), "%08X", &v)
			return v
		}
		mode, size, rmj, rmn, nsize := field(1), field(6), field(9), field(10), field(11)
		nb, err := read(int64(nsize))
		if err != nil {
			return nil, err
		}
		name := strings.TrimRight(string(nb), "\x00")
		if err := skipPad(); err != nil {
			return nil, err
		}
		if name == "TRAILER!!!" {
			return out, nil
		}
		data, err := read(int64(size))
		if err != nil {
			return nil, err
		}
		if err := skipPad(); err != nil {
			return nil, err
		}
		out = append(out, cpioEntry{name: name, mode: mode, data: data, rdevMj: rmj, rdevMn: rmn})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
