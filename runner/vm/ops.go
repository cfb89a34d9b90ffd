package vm

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/payload"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
)

// The host's requests to the guest's agent (softroce.Guest.Call,
// runner/guestagent) and their payloads. Each message has its own type: nothing of the host (paths,
// keys, callbacks) crosses.
const (
	// OpPoint runs one probe point: GuestPointRequest → result.Point,
	// with runner.Progress messages meanwhile.
	OpPoint = "point"
	// OpDevice reports the device the guest's last server opened:
	// → GuestDevice.
	OpDevice = "device"
	// OpProfiles hands over the CPU profiles the guest's processes wrote
	// during the last point, and removes them: → GuestProfiles.
	OpProfiles = "profiles"
	// OpBench runs the bench suite: BenchRequest → bench.Run, with
	// bench.Measurement messages meanwhile.
	OpBench = "bench"
	// OpHosts describes the hosts the guest's launcher placed load
	// generators on (a peer guest): → []result.Host.
	OpHosts = "hosts"
	// OpSoak runs a soak in the guest: soak.Config → soak.Result, with
	// soak.Sample messages meanwhile.
	OpSoak = "soak"
	// OpCMBench runs the rdma_cm comparison against cmtime:
	// CMBenchRequest → bench.CMRun, with bench.CMMeasurement messages
	// meanwhile.
	OpCMBench = "cmbench"
	// OpState reports what a run could leave behind in the guest, for a
	// guest that runs share (Shared): → GuestState.
	OpState = "state"
	// OpForget drops what the agent kept of the runs before (the last
	// device), for a guest the next run shares: → nothing.
	OpForget = "forget"
	// OpClimb takes a staircase's step (runner.Climber.Climb):
	// GuestClimbRequest → result.Point, with runner.Progress messages
	// meanwhile. The agent holds the climb's server and load generators
	// between steps.
	OpClimb = "climb"
	// OpDescend releases the climb's clients and stops its server
	// (runner.Climber.Descend): → nothing.
	OpDescend = "descend"
)

// GuestClimbRequest asks the guest's agent for a staircase's step
// (OpClimb): clients on top of those held until N, the server sized for
// Top at the first step.
type GuestClimbRequest struct {
	N    int         `json:"n"`
	Top  int         `json:"top"`
	Spec runner.Spec `json:"spec"`
	// Peer, when set, places the load generators in a peer guest over
	// SSH (GuestOptions.Peer).
	Peer *PeerPlacement `json:"peer,omitempty"`
}

// GuestState is what a run could leave behind in the guest. A shared
// guest must show after each run what it showed after its boot.
type GuestState struct {
	// Processes are "pid name" of every process but PID 1 and the
	// kernel's threads.
	Processes []string `json:"processes"`
	// RDMA counts each device's objects (QPs, CQs, MRs, PDs...).
	RDMA map[string]map[string]int `json:"rdma"`
	// Files are the paths of every file but directories outside /proc,
	// /sys and /dev.
	Files []string `json:"files"`
	// Sysctls are the ones a run may set (GuestOptions.MaxMapCount).
	Sysctls map[string]string `json:"sysctls"`
	// Peer: the agent holds an SSH launcher into a peer guest.
	Peer bool `json:"peer,omitempty"`
}

// Left says what s holds that base did not, and what it lost: nothing
// when a run left the guest as it found it.
func (s GuestState) Left(base GuestState) []string {
	var left []string
	added := func(what string, now, before []string) {
		had := map[string]bool{}
		for _, x := range before {
			had[x] = true
		}
		for _, x := range now {
			if !had[x] {
				left = append(left, what+" "+x)
			}
		}
	}
	added("process", s.Processes, base.Processes)
	added("file", s.Files, base.Files)
	added("file gone:", base.Files, s.Files)
	for _, dev := range slices.Sorted(maps.Keys(s.RDMA)) {
		counts := s.RDMA[dev]
		for _, obj := range slices.Sorted(maps.Keys(counts)) {
			if n, b := counts[obj], base.RDMA[dev][obj]; n != b {
				left = append(left, fmt.Sprintf("%s %s: %d, %d after boot", dev, obj, n, b))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Sysctls)) {
		if v, b := s.Sysctls[k], base.Sysctls[k]; v != b {
			left = append(left, fmt.Sprintf("sysctl %s = %s, %s after boot", k, v, b))
		}
	}
	if s.Peer {
		left = append(left, "the agent's SSH launcher into a peer guest")
	}
	return left
}

// CMBenchRequest asks the guest for the rdma_cm comparison (OpCMBench)
// on the netdev device; CMTime is the program's path, the same in the
// guest as on the host (BootCMGuest copies it in).
type CMBenchRequest struct {
	CMTime  string        `json:"cmtime"`
	Port    int           `json:"port"`
	N       int           `json:"n"`
	Passes  int           `json:"passes"`
	Modes   []string      `json:"modes"`
	Timeout time.Duration `json:"timeout"`
}

// GuestPointRequest asks the guest's agent for one point (OpPoint).
type GuestPointRequest struct {
	N     int         `json:"n"`
	Trial int         `json:"trial"`
	Spec  runner.Spec `json:"spec"`
	// Build is what the host built for this point's server command (its
	// files already copied in), or BuildError why the build failed.
	Build      *result.Build `json:"build,omitempty"`
	BuildError string        `json:"build_error,omitempty"`
	// Peer, when set, places the load generators in a peer guest over
	// SSH (GuestOptions.Peer).
	Peer *PeerPlacement `json:"peer,omitempty"`
}

// GuestDevice is the agent's answer to OpDevice.
type GuestDevice struct {
	Device *result.DeviceInfo `json:"device"`
}

// GuestProfiles are profile files by name.
type GuestProfiles map[string][]byte

// BenchRequest is what the bench suite measures, sent to the guest as
// is.
type BenchRequest struct {
	N, Concurrency, Warmup, MsgSize, Passes int
	Timeout                                 time.Duration
	Kex                                     string
}

// Check refuses a request no suite could run, in bench's flags' words.
func (r BenchRequest) Check() error {
	if r.N < 1 || r.Concurrency < 1 || r.Passes < 1 || r.Warmup < 0 {
		return fmt.Errorf("--ops, --concurrency and --passes must be at least 1, --warmup at least 0")
	}
	if err := payload.CheckSize(r.MsgSize); err != nil {
		return fmt.Errorf("--msg-size %v", err)
	}
	return nil
}

// Options are the suite's options on dev.
func (r BenchRequest) Options(dev fabric.DeviceConfig) bench.Options {
	return bench.Options{Warmup: r.Warmup, MsgSize: r.MsgSize, Timeout: r.Timeout, Device: dev, Kex: r.Kex, Passes: r.Passes}
}

// GuestProfileDir is where the guest's processes write their profiles.
const GuestProfileDir = "/tmp/rdmaprobe-profiles"
