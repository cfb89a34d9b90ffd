package softroce

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdmaprobe/rdmaprobe/command"
)

// IsGuest reports whether this process is the softroce guest's init.
func IsGuest() bool {
	return os.Getpid() == 1 && os.Getenv(guestEnv) == "1"
}

// GuestMain sets up the guest (filesystems, limits, modules, rxe0), tells
// the host it is ready and serves requests until powered off. It never
// returns: PID 1 returning would panic the kernel.
func GuestMain(h Handler) {
	start := time.Now()
	os.Setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	os.Setenv("HOME", "/root")
	setup := map[string]int64{}
	step := func(name string, f func() error) error {
		t := time.Now()
		err := f()
		setup[name] = time.Since(t).Milliseconds()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	logf("rdmaprobe guest: starting")
	err := step("mount", mountAll)
	if err == nil {
		err = step("limits", raiseLimits)
	}
	if err == nil {
		err = step("modules", func() error { return loadModules(guestModuleList) })
	}
	var port *os.File
	if err == nil {
		err = step("channel", func() (e error) { port, e = openPort(10 * time.Second); return })
	}
	if port == nil {
		logf("rdmaprobe guest: fatal: %v", err)
		poweroff()
	}
	out := &lineWriter{w: port}
	if err == nil {
		err = step("rxe", setupRxe)
	}
	if err == nil && os.Getenv(netdevEnv) == "1" {
		err = step("netdev", setupNetdev)
	}
	if arg := os.Getenv(linkEnv); err == nil && arg != "" {
		err = step("link", func() error { return setupLink(arg) })
	}
	if err != nil {
		logf("rdmaprobe guest: fatal: %v", err)
		msg, _ := json.Marshal(err.Error())
		out.send(response{Kind: kindFatal, Payload: msg})
		poweroff()
	}
	setup["total"] = time.Since(start).Milliseconds()
	info, ierr := guestInfo(context.Background(), setup)
	if ierr != nil {
		logf("rdmaprobe guest: info: %v", ierr)
	}
	payload, _ := json.Marshal(info)
	if err := out.send(response{Kind: kindReady, Payload: payload}); err != nil {
		logf("rdmaprobe guest: send ready: %v", err)
		poweroff()
	}
	logf("rdmaprobe guest: ready after %v", time.Since(start).Round(time.Millisecond))
	serve(port, out, h, setup)
	poweroff()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func poweroff() {
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		logf("rdmaprobe guest: poweroff: %v", err)
	}
	// Reboot does not return on success; if it failed, staying alive is
	// better than panicking the kernel with a less clear message.
	select {}
}

func mountAll() error {
	mounts := []struct {
		src, dst, fstype, data string
		flags                  uintptr
	}{
		{"proc", "/proc", "proc", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"sysfs", "/sys", "sysfs", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755", unix.MS_NOSUID},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/run", "tmpfs", "mode=0755", unix.MS_NOSUID | unix.MS_NODEV},
		{"tmpfs", "/dev/shm", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.dst, err)
		}
	}
	// The initramfs's root is a tmpfs whose mode is 1777 by default; sshd
	// (in a guest that runs one) refuses keys under a directory anyone
	// may write to, and nothing else here needs / writable by all.
	return os.Chmod("/", 0o755)
}

// raiseLimits lifts the two limits that cap verbs clients long before the
// device does: open files (each client holds sockets and verbs fds) and
// locked memory (every MR and queue ring is pinned).
func raiseLimits() error {
	nrOpen := uint64(1 << 20)
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			nrOpen = v
		}
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: nrOpen, Max: nrOpen}); err != nil {
		return fmt.Errorf("RLIMIT_NOFILE=%d: %w", nrOpen, err)
	}
	inf := uint64(unix.RLIM_INFINITY)
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: inf, Max: inf}); err != nil {
		return fmt.Errorf("RLIMIT_MEMLOCK=unlimited: %w", err)
	}
	return nil
}

func loadModules(list string) error {
	b, err := os.ReadFile(list)
	if err != nil {
		return err
	}
	for _, m := range strings.Fields(string(b)) {
		f, err := os.Open(m)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load %s: %w", filepath.Base(m), err)
		}
	}
	return nil
}

// waitFor polls cond until it holds. The kernel announces these states
// (virtio ports added from a workqueue, rxe port going ACTIVE) only through
// sysfs/uevents, and without udev polling sysfs is the plain way to see
// them; the deadline turns a stuck guest into an error, not a hang.
func waitFor(what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

func openPort(timeout time.Duration) (*os.File, error) {
	var dev string
	err := waitFor("virtio port "+portName, timeout, func() (bool, error) {
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			if b, err := os.ReadFile(n); err == nil && strings.TrimSpace(string(b)) == portName {
				dev = "/dev/" + filepath.Base(filepath.Dir(n))
				if _, err := os.Stat(dev); err == nil {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return os.OpenFile(dev, os.O_RDWR, 0)
}

func setupRxe() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	if err := netlink.RdmaLinkAdd(rxeDevice, "rxe", "lo"); err != nil {
		return fmt.Errorf("rdma link add %s type rxe netdev lo: %w", rxeDevice, err)
	}
	base := "/sys/class/infiniband/" + rxeDevice + "/ports/1"
	return waitFor(rxeDevice+" ACTIVE with GID "+strconv.Itoa(rxeGIDIndex), 10*time.Second, func() (bool, error) {
		st, _ := os.ReadFile(base + "/state")
		gid, _ := os.ReadFile(base + "/gids/" + strconv.Itoa(rxeGIDIndex))
		return strings.Contains(string(st), "ACTIVE") && strings.TrimSpace(string(gid)) == rxeGID, nil
	})
}

// setupNetdev creates NetdevName with NetdevAddr and binds NetdevRxe to
// it (see netdev.go), then waits until the port is ACTIVE with both the
// IPv6 link-local GID (index 0) and the IPv4-mapped one (index 1).
func setupNetdev() error {
	if err := loadModules(netdevModList); err != nil {
		return err
	}
	// Loading the dummy driver creates dummy0 itself (numdummies=1).
	link, err := netlink.LinkByName(NetdevName)
	if err != nil {
		link = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: NetdevName}}
		if err := netlink.LinkAdd(link); err != nil {
			return fmt.Errorf("ip link add %s type dummy: %w", NetdevName, err)
		}
	}
	addr, err := netlink.ParseAddr(fmt.Sprintf("%s/%d", NetdevAddr, netdevPrefix))
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("ip addr add %s dev %s: %w", addr, NetdevName, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("ip link set %s up: %w", NetdevName, err)
	}
	if err := netlink.RdmaLinkAdd(NetdevRxe, "rxe", NetdevName); err != nil {
		return fmt.Errorf("rdma link add %s type rxe netdev %s: %w", NetdevRxe, NetdevName, err)
	}
	base := "/sys/class/infiniband/" + NetdevRxe + "/ports/1"
	mapped := ipv4MappedGID(NetdevAddr)
	return waitFor(NetdevRxe+" ACTIVE with GIDs fe80:: and "+mapped, 10*time.Second, func() (bool, error) {
		st, _ := os.ReadFile(base + "/state")
		g0, _ := os.ReadFile(base + "/gids/0")
		g1, _ := os.ReadFile(base + "/gids/1")
		return strings.Contains(string(st), "ACTIVE") && strings.HasPrefix(string(g0), "fe80:") &&
			strings.TrimSpace(string(g1)) == mapped, nil
	})
}

// serve reads requests until the host goes away or asks for poweroff. Each
// request runs in its own goroutine so a long probe does not block "info"
// or "cancel".
func serve(port *os.File, out *lineWriter, h Handler, setup map[string]int64) {
	in := newLineReader(port)
	var mu sync.Mutex
	cancels := map[uint64]context.CancelFunc{}
	for {
		var req request
		if err := in.next(&req); err != nil {
			logf("rdmaprobe guest: channel closed: %v", err)
			return
		}
		switch req.Op {
		case opCancel:
			var target uint64
			json.Unmarshal(req.Payload, &target)
			mu.Lock()
			if c := cancels[target]; c != nil {
				c()
			}
			mu.Unlock()
			continue
		case OpPoweroff:
			out.send(response{ID: req.ID, Kind: kindResult})
			mu.Lock()
			for _, c := range cancels {
				c()
			}
			mu.Unlock()
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		mu.Lock()
		cancels[req.ID] = cancel
		mu.Unlock()
		// Not waited for: on poweroff or a lost host, in-flight ops end with
		// the machine, and waiting on one that ignores ctx would only delay
		// the host's Close into its kill timeout.
		go func(req request) {
			defer func() {
				mu.Lock()
				delete(cancels, req.ID)
				mu.Unlock()
				cancel()
			}()
			progress := func(v any) {
				p, err := json.Marshal(v)
				if err != nil {
					p, _ = json.Marshal(fmt.Sprintf("unencodable progress: %v", err))
				}
				out.send(response{ID: req.ID, Kind: kindProgress, Payload: p})
			}
			res, err := dispatch(ctx, req, h, progress, setup)
			if err != nil {
				msg, _ := json.Marshal(err.Error())
				out.send(response{ID: req.ID, Kind: kindError, Payload: msg})
				return
			}
			p, err := marshalPayload(res)
			if err != nil {
				msg, _ := json.Marshal("encode result: " + err.Error())
				out.send(response{ID: req.ID, Kind: kindError, Payload: msg})
				return
			}
			out.send(response{ID: req.ID, Kind: kindResult, Payload: p})
		}(req)
	}
}

func dispatch(ctx context.Context, req request, h Handler, progress func(any), setup map[string]int64) (res any, err error) {
	// A panicking handler must not take PID 1, and with it the kernel, down.
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 16<<10)
			buf = buf[:runtime.Stack(buf, false)]
			logf("rdmaprobe guest: op %s panicked: %v\n%s", req.Op, r, buf)
			err = fmt.Errorf("op %s panicked in the guest: %v", req.Op, r)
		}
	}()
	switch req.Op {
	case OpInfo:
		return guestInfo(ctx, setup)
	case OpExec:
		var er ExecRequest
		if err := json.Unmarshal(req.Payload, &er); err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		return runExec(ctx, er, nil), nil
	case OpExecPair:
		var pr ExecPairRequest
		if err := json.Unmarshal(req.Payload, &pr); err != nil {
			return nil, fmt.Errorf("exec-pair: %w", err)
		}
		return runExecPair(ctx, pr)
	case OpPutFiles:
		files, err := decodeFiles(req.Payload)
		if err != nil {
			return nil, err
		}
		return applyFiles("/", files)
	case OpRemoveFiles:
		var paths []string
		if err := json.Unmarshal(req.Payload, &paths); err != nil {
			return nil, fmt.Errorf("%s: %w", OpRemoveFiles, err)
		}
		return nil, removeFiles("/", paths)
	case OpListening:
		var port int
		if err := json.Unmarshal(req.Payload, &port); err != nil {
			return nil, fmt.Errorf("%s: %w", OpListening, err)
		}
		return tcpListening(port), nil
	case OpSysctl:
		var set map[string]string
		if err := json.Unmarshal(req.Payload, &set); err != nil {
			return nil, fmt.Errorf("sysctl: %w", err)
		}
		return sysctl(set)
	}
	if h == nil {
		return nil, fmt.Errorf("unknown op %q", req.Op)
	}
	return h(ctx, req.Op, req.Payload, progress)
}

// sysctl sets each key (dotted or slashed) and returns the values it had
// before; an empty value only reads.
func sysctl(set map[string]string) (map[string]string, error) {
	old := map[string]string{}
	for _, k := range sortedKeys(set) {
		p := "/proc/sys/" + strings.ReplaceAll(strings.TrimPrefix(k, "/proc/sys/"), ".", "/")
		b, err := os.ReadFile(p)
		if err != nil {
			return old, fmt.Errorf("sysctl %s: %w", k, err)
		}
		old[k] = strings.TrimSpace(string(b))
		if set[k] == "" {
			continue
		}
		if err := os.WriteFile(p, []byte(set[k]), 0o644); err != nil {
			return old, fmt.Errorf("sysctl %s=%s: %w", k, set[k], err)
		}
	}
	return old, nil
}

// capOut bounds what one command may send back, so a runaway tool cannot
// exhaust guest memory.
const capOut = 64 << 20

type capBuffer struct{ bytes.Buffer }

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := capOut - c.Len(); room < len(p) {
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}

func runExec(ctx context.Context, er ExecRequest, started chan<- *os.Process) ExecResult {
	if started != nil {
		defer close(started)
	}
	if len(er.Argv) == 0 {
		return ExecResult{ExitCode: -1, Error: "empty argv"}
	}
	if er.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(er.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	argv, env := er.Argv, er.Env
	if er.OnlyDevice != "" {
		var venv []string
		var err error
		if argv, venv, err = command.ViewArgv(er.OnlyDevice, argv, er.Dir); err != nil {
			return ExecResult{ExitCode: -1, Error: err.Error()}
		}
		env = append(append([]string(nil), env...), venv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = er.Dir
	if er.Stdin != "" {
		cmd.Stdin = strings.NewReader(er.Stdin)
	}
	var stdout, stderr capBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 2 * time.Second
	t := time.Now()
	err := cmd.Start()
	if err == nil {
		if started != nil {
			started <- cmd.Process
		}
		err = cmd.Wait()
	}
	res := ExecResult{
		ExitCode:   -1,
		Stdout:     stdout.String(),
		Stderr:     stderr.String(),
		DurationMS: float64(time.Since(t).Microseconds()) / 1000,
		TimedOut:   ctx.Err() == context.DeadlineExceeded,
	}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}

func runExecPair(ctx context.Context, pr ExecPairRequest) (ExecPairResult, error) {
	if pr.Port <= 0 {
		return ExecPairResult{}, errors.New("exec-pair: port is required")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var res ExecPairResult
	started := make(chan *os.Process, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		res.Server = runExec(ctx, pr.Server, started)
	}()
	proc, ok := <-started
	if !ok {
		<-done
		return res, nil
	}
	timeout := 10 * time.Second
	if pr.Server.TimeoutMS > 0 {
		timeout = time.Duration(pr.Server.TimeoutMS) * time.Millisecond
	}
	err := waitFor(fmt.Sprintf("server to listen on port %d", pr.Port), timeout, func() (bool, error) {
		select {
		case <-done:
			return false, errors.New("server exited before listening")
		default:
		}
		return tcpListening(pr.Port), nil
	})
	if err != nil {
		proc.Kill()
		<-done
		res.Client = ExecResult{ExitCode: -1, Error: "not started: " + err.Error()}
		return res, nil
	}
	res.Client = runExec(ctx, pr.Client, nil)
	if res.Client.ExitCode != 0 {
		// A failed client leaves the server waiting forever.
		proc.Kill()
	}
	<-done
	return res, nil
}

// tcpListening looks in /proc/net/tcp{,6} instead of connecting, because
// the verbs tools accept exactly one connection and a probe would use it.
func tcpListening(port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				return true
			}
		}
	}
	return false
}

func guestInfo(ctx context.Context, setup map[string]int64) (Info, error) {
	var uts unix.Utsname
	unix.Uname(&uts)
	info := Info{
		KernelRelease: unix.ByteSliceToString(uts.Release[:]),
		CPUs:          runtime.NumCPU(),
		Device:        rxeDevice,
		GIDs:          map[string]string{},
		Limits:        map[string]string{},
		SetupMS:       setup,
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		info.MemTotalKiB, info.MemAvailKiB = parseMeminfo(string(b))
	}
	if b, err := os.ReadFile("/proc/uptime"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 0 {
			info.UptimeS, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	info.PortState, info.GIDs = portInfo(rxeDevice)
	if b, err := os.ReadFile("/sys/class/infiniband/" + rxeDevice + "/ports/1/link_layer"); err == nil {
		info.LinkLayer = strings.TrimSpace(string(b))
	}
	for _, k := range []string{"vm/max_map_count", "fs/nr_open", "fs/file-max", "kernel/pid_max", "kernel/threads-max"} {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			info.Limits[strings.ReplaceAll(k, "/", ".")] = strings.TrimSpace(string(b))
		}
	}
	if _, err := os.Stat("/sys/class/infiniband/" + NetdevRxe); err == nil {
		n := &NetdevInfo{Device: NetdevRxe, Netdev: NetdevName, Addr: NetdevAddr}
		n.PortState, n.GIDs = portInfo(NetdevRxe)
		info.Netdev = n
	}
	info.Link = linkInfo()
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		info.Limits["RLIMIT_NOFILE"] = strconv.FormatUint(rl.Cur, 10)
	}
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil {
		info.Limits["RLIMIT_MEMLOCK"] = rlimitString(rl.Cur)
	}
	// sysfs has no device caps; ibv_devinfo -v asks the device itself.
	if _, err := exec.LookPath("ibv_devinfo"); err == nil {
		r := runExec(ctx, ExecRequest{Argv: []string{"ibv_devinfo", "-v", "-d", rxeDevice}, TimeoutMS: 20000}, nil)
		if r.ExitCode != 0 {
			return info, fmt.Errorf("ibv_devinfo -v: exit %d: %s", r.ExitCode, strings.TrimSpace(r.Stderr))
		}
		info.Caps = ParseDevinfoCaps(r.Stdout)
	}
	return info, nil
}

// portInfo reads port 1's state and its non-empty GIDs from sysfs.
func portInfo(dev string) (state string, gids map[string]string) {
	base := "/sys/class/infiniband/" + dev + "/ports/1/"
	if b, err := os.ReadFile(base + "state"); err == nil {
		state = strings.TrimSpace(string(b))
	}
	gids = map[string]string{}
	names, _ := filepath.Glob(base + "gids/*")
	for _, g := range names {
		b, err := os.ReadFile(g)
		v := strings.TrimSpace(string(b))
		if err == nil && v != "0000:0000:0000:0000:0000:0000:0000:0000" {
			gids[filepath.Base(g)] = v
		}
	}
	return state, gids
}

func rlimitString(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}
