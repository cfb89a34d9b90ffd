package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// Shared lends booted guests to runs in turn, so that a test binary
// boots once for its many runs instead of once a run. It lends only to a
// run of its Shape (CPUs, memory, CPU model, kernel arguments) without
// GuestOptions.Peer; any other run boots its own guest. It keeps two
// guests, each booted when first asked for: one for rdmaprobe's own
// server and clients, and one with the netdev device for runs of server
// or client commands, whose programs and
// --target-dir go in after the boot (OpPutFiles) instead of into the
// image. A guest goes back as it came: after each run Shared removes the
// files the run put (OpRemoveFiles), checks that no process, RDMA
// object, file or sysctl is left of it and has the agent forget it
// (OpForget); a guest that is not clean is powered off, said by Check,
// and the next run boots a new one.
type Shared struct {
	// Shape is the guest lent; MaxMapCount, ConsoleLog, Out and the
	// rest are each run's own.
	Shape GuestOptions
	// Dir receives the shared guests' console logs.
	Dir string

	mu     sync.Mutex
	idle   map[bool]*sharedGuest // by netdev
	pids   map[int]bool          // QEMU of each shared guest alive
	boots  int
	left   []string // what runs left behind, since Check
	closed bool
}

type sharedGuest struct {
	g      *Guest
	base   GuestState
	netdev bool
}

// settle bounds the wait, after a run, for its processes to end and its
// objects to be freed before Shared judges what it left.
const settle = 30 * time.Second

func (s *Shared) fits(opts GuestOptions) bool {
	return s != nil && !opts.Peer && opts.CPUs == s.Shape.CPUs && opts.MemMiB == s.Shape.MemMiB &&
		opts.cpuModel() == s.Shape.cpuModel() && slices.Equal(opts.KernelArgs, s.Shape.KernelArgs)
}

// lend returns the shared guest for a run with opts (the netdev one for
// cmds, with their programs put in), booting it first if none is idle
// (or the idle one died or is not clean).
func (s *Shared) lend(ctx context.Context, opts GuestOptions, simulated bool, cmds *guestCommands) (*Guest, error) {
	netdev := cmds != nil
	s.mu.Lock()
	sg := s.idle[netdev]
	delete(s.idle, netdev)
	s.mu.Unlock()
	if sg != nil {
		if left := s.check(ctx, sg); len(left) > 0 {
			s.discard(sg, "before a run", left)
			sg = nil
		}
	}
	if sg == nil {
		var err error
		if sg, err = s.boot(ctx, netdev); err != nil {
			return nil, err
		}
	}
	g := *sg.g
	g.opts = opts
	if g.opts.Out == nil {
		g.opts.Out = io.Discard
	}
	g.desc = describe(opts, g.g.Ready, simulated, netdev, false)
	g.end = func() {}
	g.put = nil
	var restore map[string]string
	if opts.MaxMapCount > 0 {
		raw, err := g.g.Call(ctx, softroce.OpSysctl, map[string]string{"vm.max_map_count": strconv.Itoa(opts.MaxMapCount)}, nil)
		if err == nil {
			err = json.Unmarshal(raw, &restore)
		}
		if err != nil {
			s.give(sg, nil, nil)
			return nil, fmt.Errorf("set guest vm.max_map_count: %w", err)
		}
	}
	// g.put grows as the run puts builds in (prepareBuild).
	g.release = func() error { return s.give(sg, restore, g.put) }
	if netdev {
		if paths := append(append([]string(nil), cmds.binaries...), opts.TargetDirs...); len(paths) > 0 {
			if err := g.putHostFiles(ctx, paths); err != nil {
				g.release()
				return nil, fmt.Errorf("copy into the guest: %w", err)
			}
		}
	}
	fmt.Fprintf(g.opts.Out, "guest: %s, ready in %.1f s (shared by runs in turn)\n", g.desc, g.g.BootTime.Seconds())
	return &g, nil
}

func (s *Shared) boot(ctx context.Context, netdev bool) (*sharedGuest, error) {
	s.mu.Lock()
	s.boots++
	n := s.boots
	s.mu.Unlock()
	shape := s.Shape
	shape.Out, shape.ConsoleLog = io.Discard, filepath.Join(s.Dir, fmt.Sprintf("shared-guest-%d-console.log", n))
	var cmds *guestCommands
	if netdev {
		cmds = &guestCommands{} // the netdev device; programs come per run
	}
	g, err := bootGuestWith(ctx, shape, false, cmds)
	if err != nil {
		return nil, err
	}
	sg := &sharedGuest{g: g, netdev: netdev}
	raw, err := g.g.Call(ctx, OpState, nil, nil)
	if err == nil {
		err = json.Unmarshal(raw, &sg.base)
	}
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("the shared guest's state after boot: %w", err)
	}
	s.mu.Lock()
	if s.pids == nil {
		s.pids = map[int]bool{}
	}
	s.pids[g.g.PID] = true
	s.mu.Unlock()
	return sg, nil
}

// give takes the guest back after a run: it removes the files the run
// put, sets back what the run set (restore), has the agent forget the
// run, and keeps the guest for the next one if nothing is left of this
// one.
func (s *Shared) give(sg *sharedGuest, restore map[string]string, put []string) error {
	select {
	case <-sg.g.g.Exited():
		s.discard(sg, "", nil) // a guest that died is the run's to report
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*settle)
	defer cancel()
	var errs []error
	if len(put) > 0 {
		errs = append(errs, sg.g.g.RemoveFiles(ctx, put))
	}
	if len(restore) > 0 {
		_, err := sg.g.g.Call(ctx, softroce.OpSysctl, restore, nil)
		errs = append(errs, err)
	}
	_, err := sg.g.g.Call(ctx, OpForget, nil, nil)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		s.discard(sg, "after a run", []string{err.Error()})
		return err
	}
	var left []string
	for deadline := time.Now().Add(settle); ; time.Sleep(500 * time.Millisecond) {
		if left = s.check(ctx, sg); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		s.discard(sg, "after a run", left)
		return fmt.Errorf("the shared guest after a run: %s", strings.Join(left, "; "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.idle[sg.netdev] != nil {
		go sg.g.Close()
		delete(s.pids, sg.g.g.PID)
		return nil
	}
	if s.idle == nil {
		s.idle = map[bool]*sharedGuest{}
	}
	s.idle[sg.netdev] = sg
	return nil
}

// check says what the guest holds that it did not after boot.
func (s *Shared) check(ctx context.Context, sg *sharedGuest) []string {
	raw, err := sg.g.g.Call(ctx, OpState, nil, nil)
	var now GuestState
	if err == nil {
		err = json.Unmarshal(raw, &now)
	}
	if err != nil {
		return []string{"its state: " + err.Error()}
	}
	return now.Left(sg.base)
}

// discard powers sg off and records why, for Check.
func (s *Shared) discard(sg *sharedGuest, when string, left []string) {
	sg.g.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pids, sg.g.g.PID)
	if len(left) > 0 {
		s.left = append(s.left, fmt.Sprintf("%s: %s", when, strings.Join(left, "; ")))
	}
}

// Check returns what runs left in the shared guest since the last Check
// (its guest was powered off for it), or nil.
func (s *Shared) Check() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.left) == 0 {
		return nil
	}
	err := fmt.Errorf("the shared guest was not as its boot left it %s", strings.Join(s.left, "; "))
	s.left = nil
	return err
}

// PIDs are the QEMU processes of the shared guests alive: children of
// this process that outlive a run.
func (s *Shared) PIDs() map[int]bool {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pids := map[int]bool{}
	for p := range s.pids {
		pids[p] = true
	}
	return pids
}

// Close powers off the idle guests; a guest lent meanwhile is powered
// off when it comes back.
func (s *Shared) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, sg := range idle {
		errs = append(errs, sg.g.Close())
		s.mu.Lock()
		delete(s.pids, sg.g.g.PID)
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}
