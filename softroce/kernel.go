package softroce

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// pvhKernel returns an uncompressed vmlinux extracted from the bzImage at
// vmlinuz, cached under dir. QEMU boots such an ELF through its PVH entry
// point, skipping the BIOS real-mode path and the in-guest decompression
// of the kernel, which under TCG cost ~3.5 s of a ~7 s boot on a 2-core
// host. The second return value says why extraction was not possible; the
// caller then boots the bzImage itself.
func pvhKernel(vmlinuz, dir string) (string, string) {
	data, err := os.ReadFile(vmlinuz)
	if err != nil {
		return "", err.Error()
	}
	sum := sha256.Sum256(data)
	out := filepath.Join(dir, "vmlinux-"+hex.EncodeToString(sum[:12]))
	if ok, _ := hasPVHNote(out); ok {
		return out, ""
	}
	raw, err := decompressKernel(data)
	if err != nil {
		return "", err.Error()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err.Error()
	}
	tmp, err := os.CreateTemp(dir, ".vmlinux-*")
	if err != nil {
		return "", err.Error()
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(raw)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", werr.Error()
	}
	if ok, why := hasPVHNote(tmp.Name()); !ok {
		return "", why
	}
	os.Chmod(tmp.Name(), 0o644)
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err.Error()
	}
	return out, ""
}

var (
	xzMagic   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	gzipMagic = []byte{0x1f, 0x8b, 0x08}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompressKernel finds the compressed payload inside a bzImage the way
// the kernel's scripts/extract-vmlinux does: try each magic, keep the first
// result that is an ELF file.
func decompressKernel(bz []byte) ([]byte, error) {
	type codec struct {
		magic []byte
		run   func([]byte) ([]byte, error)
	}
	codecs := []codec{
		// --single-stream: the bzImage has trailer bytes after the stream.
		{xzMagic, func(b []byte) ([]byte, error) { return pipeThrough(b, "xz", "-dc", "--single-stream") }},
		{zstdMagic, func(b []byte) ([]byte, error) { return pipeThrough(b, "zstd", "-dc") }},
		{gzipMagic, func(b []byte) ([]byte, error) {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			zr.Multistream(false)
			return io.ReadAll(zr)
		}},
	}
	var errs []error
	for _, c := range codecs {
		off := 0
		for tries := 0; tries < 4; tries++ {
			i := bytes.Index(bz[off:], c.magic)
			if i < 0 {
				break
			}
			out, err := c.run(bz[off+i:])
			if err == nil && len(out) > 4 && bytes.Equal(out[:4], []byte(elf.ELFMAG)) {
				return out, nil
			}
			if err != nil {
				errs = append(errs, err)
			}
			off += i + 1
		}
	}
	return nil, fmt.Errorf("no ELF kernel found inside the bzImage: %w", errors.Join(errs...))
}

func pipeThrough(in []byte, name string, args ...string) ([]byte, error) {
	if _, err := exec.LookPath(name); err != nil {
		return nil, fmt.Errorf("%s not installed", name)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out.Bytes(), nil
}

// hasPVHNote checks for XEN_ELFNOTE_PHYS32_ENTRY, the note QEMU needs to
// boot an ELF kernel directly.
func hasPVHNote(p string) (bool, string) {
	f, err := elf.Open(p)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	const phys32Entry = 18
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_NOTE {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			continue
		}
		for len(b) >= 12 {
			nsz := f.ByteOrder.Uint32(b[0:4])
			dsz := f.ByteOrder.Uint32(b[4:8])
			typ := f.ByteOrder.Uint32(b[8:12])
			name := b[12:min(len(b), 12+int(nsz))]
			if bytes.HasPrefix(name, []byte("Xen")) && typ == phys32Entry {
				return true, ""
			}
			next := 12 + align4(int(nsz)) + align4(int(dsz))
			if next > len(b) {
				break
			}
			b = b[next:]
		}
	}
	return false, "kernel has no PVH entry note (CONFIG_PVH)"
}

func align4(n int) int { return (n + 3) &^ 3 }
