package collectors

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// ParseMemInfo reads /proc/meminfo's result.MemInfoKeys, in bytes.
func ParseMemInfo(data []byte) map[string]uint64 {
	keep := map[string]bool{}
	for _, k := range result.MemInfoKeys {
		keep[k] = true
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || !keep[name] {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		out[name] = v
	}
	return out
}

// MemInfo is this machine's /proc/meminfo (nil where there is none).
func MemInfo() map[string]uint64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil
	}
	if m := ParseMemInfo(data); len(m) > 0 {
		return m
	}
	return nil
}

// oomKills is /proc/vmstat's oom_kill; ok is false where there is none.
func oomKills() (uint64, bool) {
	data, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// KernelWatch follows the kernel's memory through one point: meminfo
// when it starts, at full load and at the end, and the OOM kills in
// between with the kernel's own lines about them.
type KernelWatch struct {
	mem    result.KernelMemory
	oom    uint64
	hasOOM bool
	kmsg   int // -1: the kernel's log is not readable here
}

// WatchKernel takes the before reading; nil off Linux.
func WatchKernel() *KernelWatch {
	m := MemInfo()
	if m == nil {
		return nil
	}
	w := &KernelWatch{mem: result.KernelMemory{Before: m}, kmsg: -1}
	w.oom, w.hasOOM = oomKills()
	// The log's reader starts at its end: what the kernel says from now.
	// Close-on-exec, or the point's server command inherits it and it
	// counts against that server's RLIMIT_NOFILE.
	if fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err == nil {
		if _, err := syscall.Seek(fd, 0, io.SeekEnd); err == nil {
			w.kmsg = fd
		} else {
			syscall.Close(fd)
		}
	}
	return w
}

// Loaded takes the reading with every client connected and held.
func (w *KernelWatch) Loaded() {
	if w != nil {
		w.mem.Loaded = MemInfo()
	}
}

// Finish takes the after reading and returns the record; the watch
// ends.
func (w *KernelWatch) Finish() *result.KernelMemory {
	if w == nil {
		return nil
	}
	w.mem.After = MemInfo()
	if n, ok := oomKills(); ok && w.hasOOM && n > w.oom {
		w.mem.OOMKills = n - w.oom
	}
	if w.kmsg >= 0 {
		if w.mem.OOMKills > 0 {
			w.mem.OOMLog = oomLines(w.kmsg)
		}
		syscall.Close(w.kmsg)
		w.kmsg = -1
	}
	m := w.mem
	return &m
}

// oomLines reads the kernel log's records from fd up to its end and
// keeps those about running out of memory, at most five.
func oomLines(fd int) []string {
	var out []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EPIPE {
			continue // records overwritten before we read them
		}
		if err != nil || n <= 0 {
			return out
		}
		if l := KmsgOOMLine(string(buf[:n])); l != "" && len(out) < 5 {
			out = append(out, l)
		}
	}
}

// KmsgOOMLine is the message of one /dev/kmsg record ("6,312,9876,-;text")
// when it is about memory running out, else "".
func KmsgOOMLine(rec string) string {
	_, msg, ok := strings.Cut(rec, ";")
	if !ok {
		return ""
	}
	msg, _, _ = strings.Cut(msg, "\n") // continuation lines (" KEY=value")
	for _, s := range []string{"Out of memory", "oom-kill", "invoked oom-killer", "Memory cgroup out of memory", "page allocation failure"} {
		if strings.Contains(msg, s) {
			return msg
		}
	}
	return ""
}
