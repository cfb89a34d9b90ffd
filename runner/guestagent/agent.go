// Package guestagent is the Soft-RoCE guest's PID 1: the other end of
// runner.Guest. It runs the points the host asks for with runner's own
// Local runner, the rdmaprobe binary inside the guest as server and
// load generators, and the bench suite on the guest's device.
package guestagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/bench/cmbench"
	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/launch"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
	"github.com/rdmaprobe/rdmaprobe/soak"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// InGuest reports whether this process is the guest's PID 1.
func InGuest() bool { return softroce.IsGuest() }

// Run is PID 1 inside the guest: it serves the host's requests
// (vm.OpPoint and the others) by running points with a
// runner.Local (this same binary as server and load generators, on
// rxe0) and the bench suite. It never returns: it powers the guest off.
func Run() {
	a := &agent{}
	softroce.GuestMain(a.handle)
}

type agent struct {
	certs *certs.Pairs // made at the first point, for the guest's life
	last  *result.DeviceInfo
	// ssh starts generators in a peer guest, prepared at the first point
	// that asks for one.
	ssh *launch.SSH
	// climber holds a staircase's server and load generators between
	// its steps (vm.OpClimb), until vm.OpDescend; climbProgress is
	// where the step being taken reports.
	climber       *runner.Local
	climbProgress func(any)
}

func (a *agent) handle(ctx context.Context, op string, payload json.RawMessage, progress func(any)) (any, error) {
	switch op {
	case vm.OpPoint:
		var req vm.GuestPointRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return a.point(ctx, req, progress)
	case vm.OpClimb:
		var req vm.GuestClimbRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return a.climb(ctx, req, progress)
	case vm.OpDescend:
		return nil, a.descend()
	case vm.OpDevice:
		return vm.GuestDevice{Device: a.last}, nil
	case vm.OpHosts:
		if a.ssh == nil {
			return []result.Host{}, nil
		}
		return a.ssh.Hosts(), nil
	case vm.OpProfiles:
		return takeProfiles(vm.GuestProfileDir)
	case vm.OpSoak:
		return soakInGuest(ctx, payload, progress)
	case vm.OpState:
		return a.state()
	case vm.OpForget:
		a.last = nil
		return nil, nil
	case vm.OpCMBench:
		var req vm.CMBenchRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return cmbench.Run(ctx, cmbench.Config{CMTime: req.CMTime, Addr: vm.GuestNetdevAddr, Port: req.Port,
			Device: vm.GuestNetdevDevice, N: req.N, Passes: req.Passes, Modes: req.Modes, Timeout: req.Timeout},
			func(m bench.CMMeasurement) { progress(m) })
	case vm.OpBench:
		var req vm.BenchRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		p, err := protocol.Fabric{Backend: "verbs"}.Provider()
		if err != nil {
			return nil, fmt.Errorf("the guest's rdmaprobe: %w", err)
		}
		return bench.Suite(ctx, p, req.N, req.Concurrency, req.Options(fabric.DeviceConfig{GIDIndex: -1}),
			func(m bench.Measurement) { progress(m) })
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

// climb takes a staircase's step with the Local the agent holds for the
// climb, created at its first step.
func (a *agent) climb(ctx context.Context, req vm.GuestClimbRequest, progress func(any)) (any, error) {
	a.climbProgress = progress
	if a.climber == nil {
		opts, err := a.options(ctx, req.Spec, req.Peer)
		if err != nil {
			return nil, err
		}
		opts.Progress = (&throttle{send: func(v any) { a.climbProgress(v) }, now: time.Now}).progress
		if a.climber, err = runner.NewLocal(req.Spec, opts); err != nil {
			return nil, err
		}
	}
	pt, err := a.climber.Climb(ctx, req.N, req.Top)
	if d := a.climber.Device(); d != nil {
		a.last = d
	}
	if err != nil && !pt.Interrupted {
		return nil, err
	}
	return pt, nil
}

// descend releases the climb the agent holds, if any.
func (a *agent) descend() error {
	if a.climber == nil {
		return nil
	}
	err := a.climber.Descend()
	a.climber = nil
	return err
}

// options are a Local's options in the guest: the guest's certificate
// pairs, its profile directory, and the peer guest's launcher.
func (a *agent) options(ctx context.Context, spec runner.Spec, peer *vm.PeerPlacement) (runner.LocalOptions, error) {
	if a.certs == nil {
		p, err := certs.NewPairs()
		if err != nil {
			return runner.LocalOptions{}, err
		}
		a.certs = &p
	}
	opts := runner.LocalOptions{Certs: *a.certs}
	if spec.Profile {
		opts.ProfileDir = vm.GuestProfileDir
		if err := os.MkdirAll(vm.GuestProfileDir, 0o755); err != nil {
			return opts, err
		}
	}
	if p := peer; p != nil {
		if a.ssh == nil {
			exe, err := os.Executable()
			if err != nil {
				return opts, err
			}
			if a.ssh, err = launch.NewSSH(ctx, launch.SSHConfig{Hosts: p.Hosts, Command: p.SSH, Exe: exe,
				Fabric: spec.Fabric, Procs: spec.Procs}); err != nil {
				return opts, fmt.Errorf("the peer guest: %w", err)
			}
		}
		// The host runs perftest across the link and records it; a
		// reference taken here would go nowhere.
		opts.Launcher, opts.NoReference = a.ssh, true
	}
	return opts, nil
}

func (a *agent) point(ctx context.Context, req vm.GuestPointRequest, progress func(any)) (any, error) {
	opts, err := a.options(ctx, req.Spec, req.Peer)
	if err != nil {
		return nil, err
	}
	if req.Spec.Server != nil || req.Spec.Client != nil {
		// The commands' {dir}: nothing in it goes back to the host, so it
		// goes with the point, and the guest is left as the point found it.
		dir, err := os.MkdirTemp("", "rdmaprobe-points-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		opts.WorkDir = dir
	}
	if req.Spec.Server != nil && len(req.Spec.Server.Build) > 0 {
		opts.Build = func(context.Context, int, int) (*result.Build, error) {
			if req.BuildError != "" {
				return nil, errors.New(req.BuildError)
			}
			return req.Build, nil
		}
	}
	opts.Progress = (&throttle{send: progress, now: time.Now}).progress
	r, err := runner.NewLocal(req.Spec, opts)
	if err != nil {
		return nil, err
	}
	pt, err := r.RunPoint(ctx, req.N, req.Trial)
	if d := r.Device(); d != nil {
		a.last = d
	}
	if err != nil && !pt.Interrupted {
		return nil, err
	}
	// A point cut short is the answer to its cancellation: the host
	// keeps what it measured.
	return pt, nil
}

// throttle passes runner progress on across the serial line: counts at
// most every 250 ms, and the last count and a new phase always; readings
// of the collectors and the traffic phase's progress at most once a
// second each.
type throttle struct {
	send                              func(any)
	now                               func() time.Time
	lastSent, lastSample, lastTraffic time.Time
	phase                             string
}

func (t *throttle) progress(p runner.Progress) {
	now := t.now()
	if p.Sample != nil || p.Traffic != nil {
		last := &t.lastSample
		if p.Traffic != nil {
			last = &t.lastTraffic
		}
		if now.Sub(*last) >= time.Second {
			*last = now
			t.send(p)
		}
		return
	}
	changed := p.Phase != t.phase
	t.phase = p.Phase
	if changed || now.Sub(t.lastSent) > 250*time.Millisecond || p.Done == p.Clients {
		t.lastSent = now
		t.send(p)
	}
}

// takeProfiles reads and removes the profiles in dir.
func takeProfiles(dir string) (vm.GuestProfiles, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return vm.GuestProfiles{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := vm.GuestProfiles{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
		os.Remove(p)
	}
	return out, nil
}

// soakInGuest is the guest agent's side of vm.OpSoak.
func soakInGuest(ctx context.Context, payload json.RawMessage, progress func(any)) (any, error) {
	var cfg soak.Config
	if err := json.Unmarshal(payload, &cfg); err != nil {
		return nil, err
	}
	return runner.Soak(ctx, protocol.Fabric{Backend: "verbs", GIDIndex: -1}, cfg, func(s soak.Sample) { progress(s) })
}
