package runner

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
	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// The host's requests to the guest (softroce.Guest.Call) and their
// payloads. Each message has its own type: nothing of the host (paths,
// keys, callbacks) crosses.
const (
	// opPoint runs one probe point: guestPointRequest → result.Point,
	// with Progress messages meanwhile.
	opPoint = "point"
	// opDevice reports the device the guest's last server opened:
	// → guestDevice.
	opDevice = "device"
	// opProfiles hands over the CPU profiles the guest's processes wrote
	// during the last point, and removes them: → guestProfiles.
	opProfiles = "profiles"
	// opBench runs the bench suite: BenchRequest → bench.Run, with
	// bench.Measurement messages meanwhile.
	opBench = "bench"
	// opHosts describes the hosts the guest's launcher placed load
	// generators on (a peer guest): → []result.Host.
	opHosts = "hosts"
)

type guestPointRequest struct {
	N     int  `json:"n"`
	Trial int  `json:"trial"`
	Spec  Spec `json:"spec"`
	// Build is what the host built for this point's server command (its
	// files already copied in), or BuildError why the build failed.
	Build      *result.Build `json:"build,omitempty"`
	BuildError string        `json:"build_error,omitempty"`
	// Peer, when set, places the load generators in a peer guest over
	// SSH (GuestOptions.Peer).
	Peer *peerPlacement `json:"peer,omitempty"`
}

type guestDevice struct {
	Device *result.DeviceInfo `json:"device"`
}

// guestProfiles are profile files by name.
type guestProfiles map[string][]byte

// BenchRequest is what the bench suite measures, sent to the guest as
// is.
type BenchRequest struct {
	N, Concurrency, Warmup, MsgSize, Passes int
	Timeout                                 time.Duration
	Kex                                     string
}

// Options are the suite's options on dev.
func (r BenchRequest) Options(dev fabric.DeviceConfig) bench.Options {
	return bench.Options{Warmup: r.Warmup, MsgSize: r.MsgSize, Timeout: r.Timeout, Device: dev, Kex: r.Kex, Passes: r.Passes}
}

// guestProfileDir is where the guest's processes write their profiles.
const guestProfileDir = "/tmp/rdmaprobe-profiles"

// InGuest reports whether this process is the guest's PID 1.
func InGuest() bool { return softroce.IsGuest() }

// GuestAgent is PID 1 inside the guest: it serves the host's requests by
// running points with a Local runner (this same binary as server and
// load generators, on rxe0) and the bench suite. It never returns: it
// powers the guest off.
func GuestAgent() {
	a := &agent{}
	softroce.GuestMain(a.handle)
}

type agent struct {
	certs *certs.Pairs // made at the first point, for the guest's life
	last  *result.DeviceInfo
	// ssh starts generators in a peer guest, prepared at the first point
	// that asks for one.
	ssh *SSH
}

func (a *agent) handle(ctx context.Context, op string, payload json.RawMessage, progress func(any)) (any, error) {
	switch op {
	case opPoint:
		var req guestPointRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		return a.point(ctx, req, progress)
	case opDevice:
		return guestDevice{Device: a.last}, nil
	case opHosts:
		if a.ssh == nil {
			return []result.Host{}, nil
		}
		return a.ssh.Hosts(), nil
	case opProfiles:
		return takeProfiles(guestProfileDir)
	case opSoak:
		return soakInGuest(ctx, payload, progress)
	case opBench:
		var req BenchRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, err
		}
		p, err := Fabric{Backend: "verbs"}.Provider()
		if err != nil {
			return nil, fmt.Errorf("the guest's rdmaprobe: %w", err)
		}
		return bench.Suite(ctx, p, req.N, req.Concurrency, req.Options(fabric.DeviceConfig{GIDIndex: -1}),
			func(m bench.Measurement) { progress(m) })
	}
	return nil, fmt.Errorf("unknown op %q", op)
}

func (a *agent) point(ctx context.Context, req guestPointRequest, progress func(any)) (any, error) {
	if a.certs == nil {
		p, err := certs.NewPairs()
		if err != nil {
			return nil, err
		}
		a.certs = &p
	}
	opts := LocalOptions{Certs: *a.certs}
	if req.Spec.Server != nil && len(req.Spec.Server.Build) > 0 {
		opts.Build = func(context.Context, int, int) (*result.Build, error) {
			if req.BuildError != "" {
				return nil, errors.New(req.BuildError)
			}
			return req.Build, nil
		}
	}
	if req.Spec.Profile {
		opts.ProfileDir = guestProfileDir
		if err := os.MkdirAll(guestProfileDir, 0o755); err != nil {
			return nil, err
		}
	}
	// Progress crosses the serial line: at most every 250 ms, and the
	// last count always.
	var lastSent time.Time
	opts.Progress = func(p Progress) {
		if time.Since(lastSent) > 250*time.Millisecond || p.Done == p.Clients {
			lastSent = time.Now()
			progress(p)
		}
	}
	if p := req.Peer; p != nil {
		if a.ssh == nil {
			exe, err := os.Executable()
			if err != nil {
				return nil, err
			}
			if a.ssh, err = NewSSH(ctx, SSHConfig{Hosts: p.Hosts, Command: p.SSH, Exe: exe,
				Fabric: req.Spec.Fabric, Procs: req.Spec.Procs}); err != nil {
				return nil, fmt.Errorf("the peer guest: %w", err)
			}
		}
		opts.Launcher = a.ssh
	}
	r, err := NewLocal(req.Spec, opts)
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

// takeProfiles reads and removes the profiles in dir.
func takeProfiles(dir string) (guestProfiles, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return guestProfiles{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := guestProfiles{}
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
