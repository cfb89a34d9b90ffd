package softroce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Boot starts QEMU and returns once the guest has set up rxe0 and said so.
// On any failure QEMU is killed and reaped before Boot returns. A boot
// that stalls is started again, up to BootAttempts in all
// (BootConfig.StallTimeout).
func Boot(ctx context.Context, cfg BootConfig) (*Guest, error) {
	var stalls []string
	for attempt := 1; ; attempt++ {
		g, err := boot(ctx, cfg)
		if err == nil {
			g.Stalls = attempt - 1
			return g, nil
		}
		if !errors.Is(err, ErrStalled) || cfg.Link != nil || ctx.Err() != nil || attempt == BootAttempts {
			return nil, WrapStalls(err, stalls)
		}
		stalls = append(stalls, err.Error())
		cfg.Retry = err.Error() + "; starting the guest once more"
	}
}

// boot is one attempt of Boot.
func boot(ctx context.Context, cfg BootConfig) (*Guest, error) {
	qemu, err := qemuBinary(cfg.QEMU)
	if err != nil {
		return nil, err
	}
	accel, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Link != nil && cfg.Link.conn == nil {
		return nil, errors.New("softroce: BootConfig.Link was already used or closed")
	}

	// A socketpair handed to QEMU as a pre-connected chardev: no socket
	// path to clean up, no connect race, and EOF on our end means QEMU is
	// gone.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	conn := os.NewFile(uintptr(fds[0]), "guest-channel")
	qemuEnd := os.NewFile(uintptr(fds[1]), "guest-channel-qemu")
	conPR, conPW, err := os.Pipe()
	if err != nil {
		conn.Close()
		qemuEnd.Close()
		return nil, err
	}

	if cfg.Link != nil {
		// Closed on every path: QEMU holds its own copy once started.
		defer cfg.Link.Close()
	}
	cmd := exec.Command(qemu, qemuArgs(cfg, accel)...)
	cmd.ExtraFiles = []*os.File{conPW, qemuEnd} // fd 3, fd 4
	if cfg.Link != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, cfg.Link.conn)
	}
	stderr := newConsoleTail(nil)
	cmd.Stderr = stderr
	// QEMU must not outlive us even if we are killed without running Close.
	// Its own process group keeps a terminal's Ctrl-C, which goes to the
	// whole foreground group, from killing the guest before it can
	// answer the cancelled op with what it did (Call); ctx and Close end
	// it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}

	var logF *os.File
	if cfg.LogPath != "" {
		flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
		if cfg.Retry != "" {
			flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
		}
		if logF, err = os.OpenFile(cfg.LogPath, flags, 0o644); err != nil {
			conn.Close()
			qemuEnd.Close()
			conPR.Close()
			conPW.Close()
			return nil, fmt.Errorf("guest log: %w", err)
		}
		if cfg.Retry != "" {
			fmt.Fprintf(logF, "\nrdmaprobe: %s\n\n", cfg.Retry)
		}
	}
	g := &Guest{
		cmd:       cmd,
		conn:      conn,
		out:       &lineWriter{w: conn},
		logF:      logF,
		pending:   map[uint64]chan response{},
		readyCh:   make(chan response, 4),
		readerEnd: make(chan struct{}),
		exited:    make(chan struct{}),
		stderr:    stderr,
	}
	if logF != nil {
		g.console = newConsoleTail(logF)
	} else {
		g.console = newConsoleTail(nil)
	}
	start := time.Now()
	err = cmd.Start()
	// Only QEMU holds these now; keeping them would hide its exit from us.
	qemuEnd.Close()
	conPW.Close()
	if err != nil {
		conn.Close()
		conPR.Close()
		if logF != nil {
			logF.Close()
		}
		return nil, fmt.Errorf("start %s: %w", qemu, err)
	}
	g.PID = cmd.Process.Pid
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		io.Copy(g.console, conPR)
		conPR.Close()
	}()
	go func() {
		g.waitErr = cmd.Wait()
		<-consoleDone
		close(g.exited)
	}()
	go g.readLoop()

	if err := g.awaitReady(ctx, cfg, start); err != nil {
		g.kill()
		return nil, err
	}
	// Like exec.CommandContext, ctx bounds the guest's life: whoever
	// cancels it gets no stray QEMU even without calling Close.
	go func() {
		select {
		case <-ctx.Done():
			g.kill()
		case <-g.exited:
		}
	}()
	return g, nil
}

// withDefaults fills in what cfg leaves unset and returns QEMU's -accel.
func (cfg *BootConfig) withDefaults() (accel string, err error) {
	if cfg.Image.Kernel == "" || cfg.Image.Initrd == "" {
		return "", errors.New("softroce: BootConfig.Image is empty: call BuildImage first")
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 2
	}
	if cfg.MemMiB <= 0 {
		cfg.MemMiB = 8192
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 120 * time.Second
	}
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = 30 * time.Second
	}
	if cfg.CPUModel == "" {
		cfg.CPUModel = DefaultCPUModel
	}
	switch cfg.Accel {
	case "", "tcg":
		return "tcg,thread=multi", nil
	case "kvm":
		return "kvm", nil
	}
	return "", fmt.Errorf("softroce: unknown accel %q (tcg or kvm)", cfg.Accel)
}

// qemuArgs is QEMU's command line for cfg: the kernel's, the console on
// fd 3, the host-guest channel on fd 4 and a link's NIC on fd 5.
func qemuArgs(cfg BootConfig, accel string) []string {
	append_ := strings.Join(append([]string{
		"console=ttyS0", "panic=-1", "oops=panic", "rdinit=/init",
		"no_timer_check", "tsc=reliable", "i8042.noaux", "i8042.nokbd", "i8042.nopnp",
		guestEnv + "=1",
	}, cfg.KernelArgs...), " ")
	if cfg.Netdev {
		append_ += " " + netdevEnv + "=1"
	}
	if cfg.Link != nil {
		append_ += " " + cfg.Link.linkArg()
	}
	args := []string{
		"-nodefaults", "-no-user-config", "-nic", "none",
		"-display", "none", "-monitor", "none", "-no-reboot",
		"-machine", "pc", "-accel", accel, "-cpu", cfg.CPUModel,
		"-smp", strconv.Itoa(cfg.CPUs), "-m", strconv.Itoa(cfg.MemMiB),
		"-kernel", cfg.Image.Kernel, "-initrd", cfg.Image.Initrd, "-append", append_,
		"-chardev", "file,id=con,path=/dev/fd/3",
		"-serial", "chardev:con",
		"-chardev", "socket,id=ctl,fd=4",
		"-device", "virtio-serial-pci,id=vser",
		"-device", "virtserialport,bus=vser.0,chardev=ctl,name=" + portName,
	}
	if cfg.Link != nil {
		// fd 5; romfile= leaves out the NIC's PXE option ROM, which
		// nothing here boots from.
		args = append(args, "-netdev", "socket,id=link,fd=5",
			"-device", "virtio-net-pci,netdev=link,romfile=,mac="+cfg.Link.MAC)
	}
	return args
}

// awaitReady waits for the guest's ready message: an error if it
// reports a failed setup, QEMU dies, the console stalls, the ready
// timeout passes or ctx ends first.
func (g *Guest) awaitReady(ctx context.Context, cfg BootConfig, start time.Time) error {
	timer := time.NewTimer(cfg.ReadyTimeout)
	defer timer.Stop()
	// The stall check looks at the console once a second; off, it never
	// fires.
	var stallC <-chan time.Time
	if cfg.StallTimeout > 0 {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		stallC = tick.C
	}
	var err error
	for ready := false; !ready && err == nil; {
		select {
		case r := <-g.readyCh:
			ready = true
			if r.Kind == kindReady {
				g.BootTime = time.Since(start)
				if jerr := json.Unmarshal(r.Payload, &g.Ready); jerr != nil {
					err = fmt.Errorf("guest ready message: %w", jerr)
				}
			} else {
				var msg string
				json.Unmarshal(r.Payload, &msg)
				err = fmt.Errorf("guest setup failed: %s", msg)
			}
		case <-g.readerEnd:
			err = g.deathError("before it was ready")
		case <-timer.C:
			err = fmt.Errorf("guest not ready after %v%s", cfg.ReadyTimeout, g.console.lastLines(5))
		case <-stallC:
			if g.console.silentFor(start) >= cfg.StallTimeout {
				err = fmt.Errorf("%w: console silent for %v%s", ErrStalled, cfg.StallTimeout, g.console.lastLines(3))
			}
		case <-ctx.Done():
			err = fmt.Errorf("boot: %w", ctx.Err())
		}
	}
	return err
}

// readLoop routes guest lines to their callers; when the channel ends,
// every waiting caller learns why.
func (g *Guest) readLoop() {
	in := newLineReader(g.conn)
	defer close(g.readerEnd)
	for {
		var r response
		if err := in.next(&r); err != nil {
			g.readerErr = err
			return
		}
		if r.ID == 0 {
			select {
			case g.readyCh <- r:
			default:
			}
			continue
		}
		g.mu.Lock()
		ch := g.pending[r.ID]
		g.mu.Unlock()
		if ch != nil {
			// Blocks when the caller is slow: back-pressure reaches the
			// guest through the channel rather than growing memory here.
			ch <- r
		}
	}
}

// deathError explains why the channel ended: a kernel panic line if the
// console has one, otherwise QEMU's exit status and last words.
func (g *Guest) deathError(when string) error {
	select {
	case <-g.exited:
	case <-time.After(10 * time.Second):
		// The socket closed but QEMU lingers; kill it so the caller is
		// never left with a stray process.
		g.kill()
	}
	if p := g.console.panicLine(); p != "" {
		return fmt.Errorf("guest kernel panic %s: %s", when, p)
	}
	if g.poweroff.Load() {
		return fmt.Errorf("guest powered off %s", when)
	}
	msg := fmt.Sprintf("guest exited %s", when)
	if g.waitErr != nil {
		msg += " (qemu: " + g.waitErr.Error() + ")"
	}
	if s := strings.TrimSpace(g.stderr.lastLines(3)); s != "" {
		msg += "; qemu said: " + s
	}
	return errors.New(msg + g.console.lastLines(5))
}

// CancelGrace is how long Call waits, once ctx is done, for the guest's
// answer to the cancelled op: a probe point stops its load generators
// (up to 45 s) and its server (up to 30 s) first.
const CancelGrace = 2 * time.Minute

// Call runs op in the guest. progress, if not nil, receives each progress
// value in the order the guest sent it, on the caller's goroutine.
//
// When ctx ends first, the guest's op is cancelled and Call waits up to
// CancelGrace for its answer, since an op may answer its cancellation
// with what it did so far (a probe point cut short); it then returns
// that result, if any, with ctx's error.
func (g *Guest) Call(ctx context.Context, op string, payload any, progress func(json.RawMessage)) (json.RawMessage, error) {
	p, err := marshalPayload(payload)
	if err != nil {
		return nil, fmt.Errorf("%s: encode payload: %w", op, err)
	}
	id := g.nextID.Add(1)
	ch := make(chan response, 64)
	g.mu.Lock()
	g.pending[id] = ch
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.pending, id)
		g.mu.Unlock()
		// Unblock the reader if it is stuck delivering to us.
		for {
			select {
			case <-ch:
			default:
				return
			}
		}
	}()
	if op == OpPoweroff {
		g.poweroff.Store(true)
	}
	select {
	case <-g.readerEnd:
		return nil, g.deathError("before " + op)
	default:
	}
	if err := g.out.send(request{ID: id, Op: op, Payload: p}); err != nil {
		return nil, fmt.Errorf("%s: send: %w", op, err)
	}
	handle := func(r response) (bool, json.RawMessage, error) {
		switch r.Kind {
		case kindProgress:
			if progress != nil {
				progress(r.Payload)
			}
			return false, nil, nil
		case kindResult:
			return true, r.Payload, nil
		case kindError:
			var msg string
			if json.Unmarshal(r.Payload, &msg) != nil {
				msg = string(r.Payload)
			}
			return true, nil, fmt.Errorf("%s: %s", op, msg)
		}
		return true, nil, fmt.Errorf("%s: unexpected reply kind %q", op, r.Kind)
	}
	for {
		select {
		case r := <-ch:
			if done, res, err := handle(r); done {
				return res, err
			}
		case <-g.readerEnd:
			// Lines queued before the end still count: a probe point the
			// guest finished before dying is not lost.
			for drained := false; !drained; {
				select {
				case r := <-ch:
					if done, res, err := handle(r); done {
						return res, err
					}
				default:
					drained = true
				}
			}
			if op == OpPoweroff {
				return nil, nil
			}
			return nil, fmt.Errorf("%s: %w", op, g.deathError("during "+op))
		case <-ctx.Done():
			cid, _ := json.Marshal(id)
			g.out.send(request{ID: g.nextID.Add(1), Op: opCancel, Payload: cid})
			cancelled := fmt.Errorf("%s: %w", op, ctx.Err())
			grace := time.NewTimer(CancelGrace)
			defer grace.Stop()
			for {
				select {
				case r := <-ch:
					if done, res, _ := handle(r); done {
						return res, cancelled
					}
				case <-g.readerEnd:
					return nil, cancelled
				case <-grace.C:
					return nil, cancelled
				}
			}
		}
	}
}

// Exec runs argv in the guest.
func (g *Guest) Exec(ctx context.Context, timeout time.Duration, argv ...string) (ExecResult, error) {
	var res ExecResult
	raw, err := g.Call(ctx, OpExec, ExecRequest{Argv: argv, TimeoutMS: timeout.Milliseconds()}, nil)
	if err != nil {
		return res, err
	}
	err = json.Unmarshal(raw, &res)
	return res, err
}

// Info asks the guest for its current state.
func (g *Guest) Info(ctx context.Context) (Info, error) {
	var info Info
	raw, err := g.Call(ctx, OpInfo, nil, nil)
	if err != nil {
		return info, err
	}
	err = json.Unmarshal(raw, &info)
	return info, err
}

// Exited is closed once QEMU has exited and been reaped.
func (g *Guest) Exited() <-chan struct{} { return g.exited }

// PanicLine is the guest kernel's panic message, if it printed one.
func (g *Guest) PanicLine() string { return g.console.panicLine() }

// Close powers the guest off, waits up to 20 s, then kills QEMU; QEMU is
// always reaped before Close returns. It reports a guest kernel panic.
func (g *Guest) Close() error {
	g.closeOnce.Do(func() {
		select {
		case <-g.exited:
		default:
			g.poweroff.Store(true)
			// Best effort: the guest may already be gone.
			g.out.send(request{ID: g.nextID.Add(1), Op: OpPoweroff})
			select {
			case <-g.exited:
			case <-time.After(20 * time.Second):
				g.closeErr = errors.New("guest did not power off within 20 s; killed QEMU")
				g.kill()
			}
		}
		g.release()
		<-g.readerEnd
		if p := g.console.panicLine(); p != "" && g.closeErr == nil {
			g.closeErr = fmt.Errorf("guest kernel panic: %s", p)
		}
	})
	return g.closeErr
}

// kill ends QEMU by its PID and waits for the reaper.
func (g *Guest) kill() {
	select {
	case <-g.exited:
		return
	default:
	}
	g.cmd.Process.Kill()
	<-g.exited
	g.release()
}

// release closes our ends once QEMU is gone; the log stays complete
// because the console copy finished before exited was closed.
func (g *Guest) release() {
	g.freeOnce.Do(func() {
		g.conn.Close()
		if g.logF != nil {
			g.logF.Close()
		}
	})
}
