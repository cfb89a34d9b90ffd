// Package vm is the vm backend from the host's side: it boots the
// Soft-RoCE QEMU guest (and, with a peer, a second guest on a virtual
// link), copies in what a point needs, and asks the guest's PID 1
// (package guestagent) to run each point there with a runner.Local. Its
// Guest is a runner.Runner. ops.go holds the requests the two exchange.
package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// DefaultCPUModel is the guest's QEMU -cpu unless GuestOptions say
// otherwise (softroce.DefaultCPUModel says why it is not max).
const DefaultCPUModel = softroce.DefaultCPUModel

// GuestAvailable reports whether a Soft-RoCE guest can boot here, and
// why not.
func GuestAvailable() (bool, string) { return softroce.Available() }

// GuestOptions size the Soft-RoCE guest and say where its host-side
// output goes.
type GuestOptions struct {
	CPUs   int
	MemMiB int
	// CPUModel is QEMU's -cpu; "" = DefaultCPUModel.
	CPUModel string
	// KernelArgs are appended to the guest kernel's command line.
	KernelArgs []string
	// MaxMapCount sets the guest's vm.max_map_count (0 = the kernel's).
	MaxMapCount int
	// ConsoleLog receives the guest's serial console.
	ConsoleLog string
	// Out receives the guest's ready line and the reference tool's
	// figures.
	Out io.Writer
	// ProfileDir receives, on the host, the CPU profiles the guest's
	// processes wrote (runner.Spec.Profile).
	ProfileDir string
	// Progress, if set, receives live counts during a point.
	Progress func(runner.Progress)
	// TargetDirs are host directories a server or client command needs
	// in the guest (--target-dir), copied to the same paths.
	TargetDirs []string
	// BuildCache holds --server-build's outputs on the host; default
	// runner.DefaultBuildCache.
	BuildCache string
	// Peer boots a second guest on a virtual link and runs the load
	// generators there over SSH, Soft-RoCE on the link in both
	// (peer.go); each guest has CPUs and MemMiB.
	Peer bool
	// NoReference runs no reference tool (ibv_rc_pingpong, perftest)
	// beside the points.
	NoReference bool
	// Shared, if set, lends its guest to a run that fits it instead of
	// booting one (a test binary's many runs).
	Shared *Shared
}

// Check refuses, before anything boots, a guest of fewer than 1 vCPU or
// 256 MiB, or guests this host has not the memory for: with Peer two
// guests each take MemMiB (and CPUs), so twice MemMiB must fit in what
// the host has available.
func (o GuestOptions) Check() error {
	if o.CPUs < 1 || o.MemMiB < 256 {
		return fmt.Errorf("--vm-cpus must be ≥ 1 and --vm-mem ≥ 256 MiB")
	}
	return checkHostMemory(o.MemMiB, o.Peer, collectors.MemInfo())
}

// checkHostMemory compares the guests' memory with the host's
// /proc/meminfo (no check where there is none). QEMU touches a guest's
// memory as the guest uses it, so a guest that does not fit in what is
// available boots, and the host kills it or another process once its
// clients fill it.
func checkHostMemory(memMiB int, peer bool, host map[string]uint64) error {
	avail, total := host["MemAvailable"]>>20, host["MemTotal"]>>20
	if avail == 0 {
		return nil
	}
	guests := uint64(1)
	what := fmt.Sprintf("--vm-mem %s MiB does not fit", analysis.Thousands(memMiB))
	if peer {
		guests = 2
		what = fmt.Sprintf("--vm-peer's two guests of --vm-mem %s MiB each do not fit", analysis.Thousands(memMiB))
	}
	if guests*uint64(memMiB) <= avail {
		return nil
	}
	return fmt.Errorf("%s in this host's memory: %s MiB available of %s MiB (MemAvailable); lower --vm-mem to at most %s",
		what, analysis.Thousands(int(avail)), analysis.Thousands(int(total)), analysis.Thousands(int(avail/guests)))
}

func (o GuestOptions) cpuModel() string {
	if o.CPUModel == "" {
		return DefaultCPUModel
	}
	return o.CPUModel
}

// cpu describes the guest's emulated CPU, e.g. "QEMU TCG qemu64" or
// "QEMU TCG qemu64, kernel mitigations=off".
func (o GuestOptions) cpu() string {
	s := "QEMU TCG " + o.cpuModel()
	if len(o.KernelArgs) > 0 {
		s += ", kernel " + strings.Join(o.KernelArgs, " ")
	}
	return s
}

// Guest is a booted Soft-RoCE guest: a runner.Runner whose points run inside
// it (NewGuest), or the place of the bench suite (BootGuest, Bench).
// The guest's side is package guestagent.
type Guest struct {
	g   *softroce.Guest
	end context.CancelFunc // ends the guest's life (bootGuest)
	// release, for a guest Shared lent, gives it back instead of Close
	// powering it off.
	release func() error
	opts    GuestOptions
	spec    runner.Spec
	desc    string
	ref     *result.Reference
	dev     *result.DeviceInfo
	// build builds a server command on the host; pushed are the builds
	// already copied into the guest, by key.
	build  runner.BuildFunc
	pushed map[string]bool
	// put are the paths the run created in the guest after its boot, in
	// order: a guest Shared lent loses them when it comes back.
	put []string
	// peer, with GuestOptions.Peer, is the guest the generators run in;
	// peerHosts how the first guest's launcher described it.
	peer      *guestPeer
	peerHosts []result.Host
	// dataRef is perftest's data path at the run's message size, when
	// the points run a traffic phase.
	dataRef []result.Reference
}

// NewGuest boots the guest for spec's points and, on a real device,
// runs the reference tool there. A sim protocol.Fabric runs the simulated fabric
// inside the guest (for counts past this host's open-file limit).
func NewGuest(ctx context.Context, spec runner.Spec, opts GuestOptions) (*Guest, error) {
	simulated := spec.Fabric.Backend == "sim"
	var cmds *guestCommands
	if spec.Server != nil || spec.Client != nil {
		var err error
		if cmds, err = commandsForGuest(spec, opts); err != nil {
			return nil, err
		}
		spec = cmds.spec
	}
	if opts.Peer {
		if simulated || cmds != nil {
			return nil, fmt.Errorf("--vm-peer runs rdmaprobe's own server and clients on Soft-RoCE: not with --sim-in-vm, --server-cmd or --client-cmd")
		}
	}
	var g *Guest
	var err error
	if opts.Shared.fits(opts) {
		g, err = opts.Shared.lend(ctx, opts, simulated, cmds)
	} else {
		g, err = bootGuestWith(ctx, opts, simulated, cmds)
	}
	if err != nil {
		return nil, err
	}
	if g.peer != nil {
		// Both sides on the link's device; the server listens on the
		// first guest's link address, where the peer reaches it.
		spec.Fabric.Device = softroce.LinkRxe
		spec.Listen = strings.Split(g.g.Ready.Link.Addr, "/")[0]
	}
	if !simulated && spec.Fabric.Device == "" {
		spec.Fabric.Device = softroce.Device
	}
	g.spec = spec
	if cmds != nil && spec.Server != nil && len(spec.Server.Build) > 0 {
		cache := opts.BuildCache
		if cache == "" {
			cache = runner.DefaultBuildCache()
		}
		g.build, g.pushed = runner.NewBuilder(spec.Server.Build, cache), map[string]bool{}
	}
	if !simulated && !opts.NoReference { // a simulated fabric has no RDMA device to check
		g.ref = g.reference(ctx)
		if protocol.RunsTraffic(spec.Traffic, spec.Client, spec.CM) {
			g.dataRef = g.dataPathReference(ctx, result.ReferenceBefore)
		}
	}
	return g, nil
}

// Finish measures perftest's data path again after the last point
// (Finisher), when it did before the first: the host's speed drifts
// (perftest's latency has moved by half within an hour here), and the
// report compares the run with both.
func (g *Guest) Finish(ctx context.Context) {
	if len(g.dataRef) == 0 {
		return // a simulated fabric, or no traffic phase
	}
	g.dataRef = append(g.dataRef, g.dataPathReference(ctx, result.ReferenceAfter)...)
}

// dataPathReference runs perftest's latency and bandwidth tools of the
// traffic phase's operation at its message size, where the run's
// clients and server are (pair), over each transport the run's designs
// are set against (runner.Spec.Transports): RC, and UD for ud mode.
func (g *Guest) dataPathReference(ctx context.Context, when string) []result.Reference {
	size := g.spec.MsgSize
	if size <= 0 {
		size = 4096
	}
	var refs []result.Reference
	for _, transport := range g.spec.Transports() {
		for _, r := range softroce.DataPathReference(ctx, g.pair(), g.spec.Traffic.Op, size, transport) {
			ref := referenceOf(r, when, transport)
			tool := referenceName(ref)
			if r.Err != nil {
				fmt.Fprintf(g.opts.Out, "reference (%s the points): %s failed: %v\n", when, tool, r.Err)
			} else if v, ok := r.Figures["t_typical"]; ok {
				fmt.Fprintf(g.opts.Out, "reference (%s the points): %s %d B %s: t_typical %.2f µs, p99 %.2f µs\n", when, tool, size, r.Where, v, r.Figures["99%"])
			} else {
				fmt.Fprintf(g.opts.Out, "reference (%s the points): %s %d B %s: %.0f msg/s, %.2f MB/s\n", when, tool, size, r.Where, r.Figures["msg/s"], r.Figures["BW average"])
			}
			refs = append(refs, ref)
		}
	}
	return refs
}

// referenceName is a reference's tool, with its transport when that is
// not perftest's default.
func referenceName(r result.Reference) string {
	if r.Transport != "" {
		return r.Tool + " -c " + r.Transport
	}
	return r.Tool
}

// pair is where the references run: across the link with --vm-peer,
// server in this guest and client in the peer, as rdmaprobe's are;
// else both in this guest.
func (g *Guest) pair() softroce.Pair {
	if g.peer != nil {
		// bootPair checked that both guests have their link device.
		if p, err := softroce.AcrossLink(g.g, g.peer.g); err == nil {
			return p
		}
	}
	return softroce.Local(g.g)
}

// referenceOf records a reference tool's run over transport.
func referenceOf(r softroce.PerftestResult, when, transport string) result.Reference {
	ref := result.Reference{Tool: r.Tool, Command: r.Command, Where: r.Where, Figures: r.Figures, Output: r.Output, When: when, Transport: transport}
	if r.Err != nil {
		ref.Error = r.Err.Error()
	} else if when == "" {
		ref.Output = "" // the pingpong's figures say it all
	}
	return ref
}

// BootGuest boots the guest for the bench suite.
func BootGuest(ctx context.Context, opts GuestOptions) (*Guest, error) {
	if opts.Shared.fits(opts) {
		return opts.Shared.lend(ctx, opts, false, nil)
	}
	return bootGuest(ctx, opts, false)
}

func bootGuest(ctx context.Context, opts GuestOptions, simulated bool) (*Guest, error) {
	return bootGuestWith(ctx, opts, simulated, nil)
}

func bootGuestWith(ctx context.Context, opts GuestOptions, simulated bool, cmds *guestCommands) (*Guest, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if err := opts.Check(); err != nil {
		return nil, err
	}
	exe, err := verbsbin.Path(ctx)
	if err != nil {
		return nil, err
	}
	ic := softroce.ImageConfig{Binary: exe, ExtraBinaries: softroce.DefaultExtraBinaries}
	if opts.Peer {
		if err := peerPackages(); err != nil {
			return nil, err
		}
		ic.ExtraBinaries = append(append([]string(nil), ic.ExtraBinaries...), peerBinaries...)
	}
	if cmds != nil {
		ic.ExtraBinaries = append(append([]string(nil), ic.ExtraBinaries...), cmds.binaries...)
		ic.ExtraDirs = opts.TargetDirs
	}
	img, err := softroce.BuildImage(ctx, ic)
	if err != nil {
		return nil, err
	}
	// ctx aborts the boot, but a booted guest lives until Close: a point
	// cancelled by Ctrl-C is answered by the guest with what it measured
	// (softroce.Guest.Call), which a guest ending with ctx could not do.
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, end)
	bc := softroce.BootConfig{Image: img, CPUs: opts.CPUs, MemMiB: opts.MemMiB,
		LogPath: opts.ConsoleLog, CPUModel: opts.cpuModel(), KernelArgs: opts.KernelArgs, Netdev: cmds != nil}
	var sg *softroce.Guest
	var peer *guestPeer
	if opts.Peer {
		peerLog := ""
		if opts.ConsoleLog != "" {
			peerLog = strings.TrimSuffix(opts.ConsoleLog, ".log") + "-peer.log"
		}
		sg, peer, err = bootPair(life, img, bc, peerLog)
	} else {
		sg, err = softroce.Boot(life, bc)
	}
	if !stop() && err == nil {
		err = fmt.Errorf("boot: %w", ctx.Err()) // ctx ended as the boot did: life ends the guest
	}
	if err != nil {
		end()
		return nil, err
	}
	g := &Guest{g: sg, opts: opts, peer: peer, end: end}
	if opts.MaxMapCount > 0 {
		for _, x := range g.guests() {
			if _, err := x.Call(ctx, softroce.OpSysctl, map[string]string{"vm.max_map_count": strconv.Itoa(opts.MaxMapCount)}, nil); err != nil {
				g.Close()
				return nil, fmt.Errorf("set guest vm.max_map_count: %w", err)
			}
		}
	}
	g.desc = describe(opts, sg.Ready, simulated, cmds != nil, peer != nil)
	retried := ""
	switch {
	case peer != nil && sg.Stalls+peer.g.Stalls > 0:
		retried = fmt.Sprintf(" (%d of its boots and %d of the peer's hung in the kernel, and the two were started again)", sg.Stalls, peer.g.Stalls)
	case sg.Stalls == 1:
		retried = " (its first boot hung in the kernel and was started again)"
	case sg.Stalls > 1:
		retried = fmt.Sprintf(" (its first %d boots hung in the kernel and it was started again)", sg.Stalls)
	}
	fmt.Fprintf(opts.Out, "guest: %s, ready in %.1f s%s\n", g.desc, sg.BootTime.Seconds(), retried)
	return g, nil
}

// describe is the backend's description of a guest that reported info.
func describe(opts GuestOptions, info softroce.Info, simulated, netdev, peer bool) string {
	dev := info.Device
	if netdev && info.Netdev != nil {
		dev = fmt.Sprintf("%s on %s (%s)", info.Netdev.Device, info.Netdev.Netdev, info.Netdev.Addr)
	}
	switch {
	case simulated:
		return fmt.Sprintf("sim: simulated fabric (pure Go, not an RDMA measurement) in a QEMU guest on Linux %s (%s, %d vCPU, %s)",
			runner.ShortRelease(info.KernelRelease), strings.TrimPrefix(opts.cpu(), "QEMU "), opts.CPUs, memString(opts.MemMiB))
	case peer:
		l := info.Link
		return fmt.Sprintf("vm: %s on %s (%s) on Linux %s (Soft-RoCE, %s, %d vCPU, %s), load generators in a second guest across a virtual link",
			l.Device, l.Netdev, l.Addr, runner.ShortRelease(info.KernelRelease), opts.cpu(), opts.CPUs, memString(opts.MemMiB))
	}
	return fmt.Sprintf("vm: %s on Linux %s (Soft-RoCE, %s, %d vCPU, %s)",
		dev, runner.ShortRelease(info.KernelRelease), opts.cpu(), opts.CPUs, memString(opts.MemMiB))
}

// Description is the backend's description with the guest's kernel,
// CPU and size.
func (g *Guest) Description() string { return g.desc }

// Describe records the guest: its description, environment and the
// reference tool's figures (Describer).
func (g *Guest) Describe(run *result.Run) {
	run.Backend.Description = g.desc
	env := g.Environment()
	run.Environment.Guest = &env
	run.Environment.Reference = g.ref
	if hs := g.hosts(); hs != nil {
		run.Hosts = hs
		run.Config.Launcher = "ssh"
		run.Config.ServerAddr = g.spec.ListenAddr()
	}
	run.Environment.DataPath = g.dataRef
}

// Environment is the guest's, as the guest reported it at boot.
func (g *Guest) Environment() result.Environment {
	info := g.g.Ready
	return result.Environment{
		OS: "Debian (rdmaprobe guest)", Kernel: info.KernelRelease, Arch: "amd64",
		CPUs: info.CPUs, MemoryBytes: info.MemTotalKiB * 1024,
	}
}

// reference runs an independent tool where the run's clients and
// server are (pair).
func (g *Guest) reference(ctx context.Context) *result.Reference {
	r := softroce.Reference(ctx, g.pair())
	ref := referenceOf(r, "", "")
	if r.Err != nil {
		fmt.Fprintf(g.opts.Out, "reference: %s failed: %v\n", r.Tool, r.Err)
	} else {
		fmt.Fprintf(g.opts.Out, "reference: %s %s: %.1f µs/iter, %.1f Mbit/s\n", r.Tool, r.Where, r.Figures["usec/iter"], r.Figures["Mbit/sec"])
	}
	return &ref
}

// Device is the device the guest's server last opened.
func (g *Guest) Device() *result.DeviceInfo { return g.dev }

// Close powers the guest off, and its peer.
func (g *Guest) Close() error {
	if g.release != nil {
		return g.release()
	}
	defer g.end()
	var perr error
	if g.peer != nil {
		perr = g.peer.close()
	}
	return errors.Join(g.g.Close(), perr)
}

// guests are the guest and its peer, if any.
func (g *Guest) guests() []*softroce.Guest {
	if g.peer != nil {
		return []*softroce.Guest{g.g, g.peer.g}
	}
	return []*softroce.Guest{g.g}
}

// SetMode sets the server design of the points to come
// (runner.ModeSetter): each point's request carries the spec into the
// guest, so the same guest runs every design.
func (g *Guest) SetMode(mode string) { g.spec.Mode = mode }

// RunPoint runs one point inside the guest (runner.Runner.RunPoint), with QEMU
// sampled from the host beside the guest's own view: first the server's
// build for its count, if any (prepareBuild), then for a 1-client point
// with a traffic phase perftest's latency tool (latencyReference), then
// the point.
func (g *Guest) RunPoint(ctx context.Context, n, trial int) (result.Point, error) {
	req := GuestPointRequest{N: n, Trial: trial, Spec: g.spec}
	if g.peer != nil {
		req.Peer = &g.peer.placement
	}
	if err := g.prepareBuild(ctx, n, &req); err != nil {
		return result.Point{Clients: n, Trial: trial}, err
	}
	var ref *result.Reference
	if n == 1 && len(g.dataRef) > 0 && ctx.Err() == nil {
		ref = g.latencyReference(ctx)
	}
	pt, err := g.runPoint(ctx, OpPoint, req, n, trial)
	pt.LatencyReference = ref
	return pt, err
}

// Climb takes a staircase's step inside the guest (runner.Climber),
// whose agent holds the climb's server and load generators between
// steps.
func (g *Guest) Climb(ctx context.Context, n, top int) (result.Point, error) {
	req := GuestClimbRequest{N: n, Top: top, Spec: g.spec}
	if g.peer != nil {
		req.Peer = &g.peer.placement
	}
	return g.runPoint(ctx, OpClimb, req, n, 1)
}

// Descend has the guest's agent release the climb's clients and stop
// its server (runner.Climber).
func (g *Guest) Descend() error {
	if _, err := g.g.Call(context.Background(), OpDescend, nil, nil); err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	if g.spec.Profile && g.opts.ProfileDir != "" {
		return g.fetchProfiles(context.Background())
	}
	return nil
}

// prepareBuild runs the server's build for n clients (--server-build),
// if any, and puts it in req: builds run on the host (the guest has no
// compiler), and what one produced goes into the guest once, at the
// same path. A failed build is the point's to report (req.BuildError);
// a failed copy into the guest fails the point here.
func (g *Guest) prepareBuild(ctx context.Context, n int, req *GuestPointRequest) error {
	if g.build == nil {
		return nil
	}
	b, err := g.build(ctx, n, g.spec.MaxClientsAt(n))
	if err != nil {
		req.BuildError = err.Error()
		return nil
	}
	if !g.pushed[b.Key] {
		err := g.putHostFiles(ctx, []string{b.Dir})
		if err != nil {
			return fmt.Errorf("copy the build into the guest: %w", err)
		}
		g.pushed[b.Key] = true
	}
	req.Build = b
	return nil
}

// putHostFiles copies host paths into the guest at the same paths
// (softroce.HostFiles), remembering what it created.
func (g *Guest) putHostFiles(ctx context.Context, paths []string) error {
	files, err := softroce.HostFiles(paths)
	if err != nil {
		return err
	}
	created, err := g.g.PutFiles(ctx, files)
	g.put = append(g.put, created...)
	return err
}

// latencyReference runs perftest's latency tool where the run's clients
// and server are (pair), at its message size, just before a 1-client
// point (Point.LatencyReference): its figure and the point's latency are
// then taken in turns.
func (g *Guest) latencyReference(ctx context.Context) *result.Reference {
	size := g.spec.MsgSize
	if size <= 0 {
		size = 4096
	}
	transport := result.TransportOf(g.spec.Mode)
	r := softroce.DataPathLatency(ctx, g.pair(), g.spec.Traffic.Op, size, transport)
	ref := referenceOf(r, result.ReferencePoint, transport)
	if r.Err != nil {
		fmt.Fprintf(g.opts.Out, "reference (before the point): %s failed: %v\n", referenceName(ref), r.Err)
	} else {
		fmt.Fprintf(g.opts.Out, "reference (before the point): %s %d B %s: t_typical %.2f µs, p99 %.2f µs\n",
			referenceName(ref), size, r.Where, r.Figures["t_typical"], r.Figures["99%"])
	}
	return &ref
}

// runPoint runs the point req asks for in the guest, QEMU sampled from
// the host meanwhile.
func (g *Guest) runPoint(ctx context.Context, op string, req any, n, trial int) (result.Point, error) {
	var qemu *collectors.Session
	if g.spec.SampleInterval >= 0 {
		qemu = collectors.Start(ctx, collectors.Config{Interval: g.spec.SampleInterval,
			Procs: func() []collectors.Proc { return []collectors.Proc{{Role: "qemu", PID: g.g.PID}} }})
	}
	started := time.Now()
	var last runner.Progress // how far the point got, by the guest's last report
	raw, err := g.g.Call(ctx, op, req, func(m json.RawMessage) {
		var p runner.Progress
		if json.Unmarshal(m, &p) == nil {
			last = p
			if g.opts.Progress != nil {
				g.opts.Progress(p)
			}
		}
	})
	var host []result.Sample
	if qemu != nil {
		host, _, _ = qemu.Stop()
	}
	dead := false
	select {
	case <-g.g.Exited():
		dead = true
	default:
	}
	if err != nil && raw == nil && !dead && ctx.Err() == nil {
		return result.Point{Clients: n, Trial: trial}, fmt.Errorf("guest: %w", err) // the point could not run
	}
	if err != nil && raw == nil {
		// The guest died (or did not answer its cancellation): what it
		// measured is lost with it but for how far its last progress
		// report said it got, and the host's samples of QEMU.
		pt := result.Point{Clients: n, Trial: trial, StartedAt: started.UTC(), Interrupted: true, Cumulative: op == OpClimb,
			Attempted: last.Done, Connected: last.OK, Outcomes: map[string]int{},
			Samples: host, DurationSec: time.Since(started).Seconds(), Error: "guest: " + err.Error()}
		if ctx.Err() != nil {
			pt.Error = runner.Interrupted
		}
		if last.OK > 0 {
			pt.Outcomes[result.OutcomeOK] = last.OK
		}
		analysis.Judge(&pt, g.spec.Threshold)
		return pt, fmt.Errorf("guest: %w", err)
	}
	// A climb's processes write their profiles as they exit, at Descend.
	if g.spec.Profile && g.opts.ProfileDir != "" && op != OpClimb {
		if err := g.fetchProfiles(ctx); err != nil {
			fmt.Fprintf(g.opts.Out, "profiles: %v\n", err)
		}
	}
	var pt result.Point
	if err := json.Unmarshal(raw, &pt); err != nil {
		return pt, fmt.Errorf("guest sent an unreadable point: %w", err)
	}
	mergeHostSamples(&pt, host)
	if err != nil {
		// Cancelled, and the guest answered with the point cut short.
		return pt, fmt.Errorf("guest: %w", err)
	}
	if g.dev == nil {
		var d GuestDevice
		if r, err := g.g.Call(ctx, OpDevice, nil, nil); err == nil && json.Unmarshal(r, &d) == nil {
			g.dev = d.Device
		}
	}
	return pt, nil
}

// mergeHostSamples adds to each guest sample the host's QEMU reading
// nearest to it in time (both count seconds from their own start of the
// point), so a sample holds one reading per process: the host samples
// every interval while the guest's sampler backs off from large counts,
// and readings between two guest samples are dropped.
func mergeHostSamples(pt *result.Point, host []result.Sample) {
	if len(host) == 0 {
		return
	}
	j := 0
	for i := range pt.Samples {
		t := pt.Samples[i].T
		for j+1 < len(host) && math.Abs(host[j+1].T-t) <= math.Abs(host[j].T-t) {
			j++
		}
		pt.Samples[i].Procs = append(pt.Samples[i].Procs, host[j].Procs...)
	}
}

// fetchProfiles copies the guest's profiles of the last point into
// ProfileDir on the host.
func (g *Guest) fetchProfiles(ctx context.Context) error {
	raw, err := g.g.Call(ctx, OpProfiles, nil, nil)
	if err != nil {
		return fmt.Errorf("fetch from the guest: %w", err)
	}
	var files GuestProfiles
	if err := json.Unmarshal(raw, &files); err != nil {
		return fmt.Errorf("guest sent unreadable profiles: %w", err)
	}
	dir := g.opts.ProfileDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// BootCMGuest boots the guest for the rdma_cm comparison: with the
// netdev device, where rdma_cm resolves, and the programs named (cmtime)
// carried into its image at their host paths. It boots one of its own
// even with Shared: rdmaprobe's side of the comparison runs in the
// guest's agent, whose librdmacm keeps the device's context open for
// the agent's life, so the guest would not go back as its boot left it.
func BootCMGuest(ctx context.Context, opts GuestOptions, programs []string) (*Guest, error) {
	return bootGuestWith(ctx, opts, false, &guestCommands{binaries: programs})
}

// BenchRDMACM runs the rdma_cm comparison inside the guest.
func (g *Guest) BenchRDMACM(ctx context.Context, req CMBenchRequest, progress func(bench.CMMeasurement)) (*bench.CMRun, error) {
	raw, err := g.g.Call(ctx, OpCMBench, req, func(m json.RawMessage) {
		var meas bench.CMMeasurement
		if json.Unmarshal(m, &meas) == nil {
			progress(meas)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	var got bench.CMRun
	if err := json.Unmarshal(raw, &got); err != nil {
		return nil, fmt.Errorf("guest sent an unreadable rdma_cm comparison: %w", err)
	}
	return &got, nil
}

// Bench runs the bench suite inside the guest, so the vm backend's
// figures are all taken under the same CPU emulation.
func (g *Guest) Bench(ctx context.Context, req BenchRequest, progress func(bench.Measurement)) (*bench.Run, error) {
	raw, err := g.g.Call(ctx, OpBench, req, func(m json.RawMessage) {
		var meas bench.Measurement
		if json.Unmarshal(m, &meas) == nil {
			progress(meas)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	var got bench.Run
	if err := json.Unmarshal(raw, &got); err != nil {
		return nil, fmt.Errorf("guest sent an unreadable bench run: %w", err)
	}
	return &got, nil
}

func memString(mib int) string {
	if mib%1024 == 0 {
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}
