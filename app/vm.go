package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/probe"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// vmFlags size the Soft-RoCE guest; the defaults are the predecessor's
// t3.large (2 vCPU, 8 GiB).
func vmFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "vm-cpus", Value: 2, Usage: "vm: guest vCPUs"},
		&cli.IntFlag{Name: "vm-mem", Value: 8192, Usage: "vm: guest memory in MiB"},
		&cli.StringFlag{Name: "vm-cpu-model", Value: softroce.DefaultCPUModel, Usage: "vm: QEMU -cpu model of the guest (see softroce.DefaultCPUModel for why not max)"},
		&cli.IntFlag{Name: "vm-max-map-count", Usage: "vm: set the guest's vm.max_map_count (default: the kernel's 65530)"},
		&cli.StringFlag{Name: "vm-kernel-args", Usage: "vm: extra guest kernel command line, space-separated (e.g. mitigations=off); recorded in the backend description"},
	}
}

// bootConfig is the guest the vm flags ask for.
func bootConfig(c *cli.Context, img softroce.Image, cpus, mem int, logPath string) softroce.BootConfig {
	return softroce.BootConfig{Image: img, CPUs: cpus, MemMiB: mem, LogPath: logPath,
		CPUModel: c.String("vm-cpu-model"), KernelArgs: strings.Fields(c.String("vm-kernel-args"))}
}

// guestCPU describes the guest's emulated CPU for backend descriptions,
// e.g. "QEMU TCG qemu64" or "QEMU TCG qemu64, kernel mitigations=off".
func guestCPU(c *cli.Context) string {
	s := "QEMU TCG " + c.String("vm-cpu-model")
	if a := strings.Fields(c.String("vm-kernel-args")); len(a) > 0 {
		s += ", kernel " + strings.Join(a, " ")
	}
	return s
}

// simInVMFlag runs the sim backend inside the guest: same simulated
// fabric, but under the guest's kernel, where rdmaprobe is root with every
// capability. For counts past what this host lets a process open (a
// sandbox's hard RLIMIT_NOFILE of 20,000 stops the sim server at ~20k
// clients: one TLS connection each).
func simInVMFlag() cli.Flag {
	return &cli.BoolFlag{Name: "sim-in-vm", Usage: "with --backend sim: run the simulated fabric's server and generators inside the QEMU guest (for counts past this host's open-file limit; still simulated)"}
}

// opPoint runs one probe point inside the guest.
const opPoint = "point"

// opProfiles hands the host the CPU profiles the guest's server and load
// generators wrote during the last point (--profile), and removes them.
const opProfiles = "profiles"

// guestProfileDir is where they are written inside the guest.
const guestProfileDir = "/tmp/rdmaprobe-profiles"

// pointRequest is what the host sends for one point.
type pointRequest struct {
	N, Trial int
	Config   runner.Config
}

func init() {
	vmAvailable = softroce.Available
	vmBackend = newVMBackend
}

func newVMBackend(c *cli.Context, reason string) (*backend, error) {
	if ok, why := softroce.Available(); !ok {
		return nil, fmt.Errorf("--backend vm: %s", why)
	}
	b := &backend{
		Backend: result.Backend{Name: "vm", Reason: reason,
			Description: "vm: rxe0 (Soft-RoCE in a QEMU guest)"},
		childArgs: []string{"--backend", "verbs", "--gid-index", "-1"},
	}
	simulated := c.Bool("sim-in-vm")
	if simulated {
		b.Backend = result.Backend{Name: "sim", Simulated: true, Reason: reason,
			Description: "sim: simulated fabric (pure Go, not an RDMA measurement) in a QEMU guest"}
		b.childArgs = []string{"--backend", "sim"}
	}
	cpus, mem, maps := c.Int("vm-cpus"), c.Int("vm-mem"), c.Int("vm-max-map-count")
	if cpus < 1 || mem < 256 {
		return nil, fmt.Errorf("--vm-cpus must be ≥ 1 and --vm-mem ≥ 256 MiB")
	}
	out := c.App.Writer
	b.open = func(ctx context.Context, cfg runner.Config, run *result.Run, dir string) (probe.Measure, func(), error) {
		exe, err := verbsBinary(ctx)
		if err != nil {
			return nil, nil, err
		}
		img, err := softroce.BuildImage(ctx, softroce.ImageConfig{Binary: exe, ExtraBinaries: softroce.DefaultExtraBinaries})
		if err != nil {
			return nil, nil, err
		}
		logPath := filepath.Join(dir, "guest-console.log")
		g, err := softroce.Boot(ctx, bootConfig(c, img, cpus, mem, logPath))
		if err != nil {
			return nil, nil, err
		}
		info := g.Ready
		if maps > 0 {
			if _, err := g.Call(ctx, softroce.OpSysctl, map[string]string{"vm.max_map_count": fmt.Sprint(maps)}, nil); err != nil {
				g.Close()
				return nil, nil, fmt.Errorf("set guest vm.max_map_count: %w", err)
			}
		}
		genv := guestEnvironment(info)
		run.Environment.Guest = &genv
		run.Backend.Description = fmt.Sprintf("vm: %s on Linux %s (Soft-RoCE, %s, %d vCPU, %s)",
			info.Device, shortRelease(info.KernelRelease), guestCPU(c), cpus, memString(mem))
		if simulated {
			run.Backend.Description = fmt.Sprintf("sim: simulated fabric (pure Go, not an RDMA measurement) in a QEMU guest on Linux %s (%s, %d vCPU, %s)",
				shortRelease(info.KernelRelease), strings.TrimPrefix(guestCPU(c), "QEMU "), cpus, memString(mem))
		}
		fmt.Fprintf(out, "guest: %s, ready in %.1f s\n", run.Backend.Description, g.BootTime.Seconds())
		if !simulated { // a simulated fabric has no RDMA device to check
			referenceRun(ctx, g, run, out, info.Device)
		}
		measure := func(ctx context.Context, n, trial int) (result.Point, error) {
			gcfg := cfg
			gcfg.Exe, gcfg.CertFile, gcfg.KeyFile = "", "", ""
			gcfg.ClientCertFile, gcfg.ClientKeyFile = "", ""
			if !simulated {
				gcfg.SampleDevice = info.Device
			}
			// QEMU seen from the host, beside the guest's own view.
			var qemu *collectors.Session
			if cfg.SampleInterval >= 0 {
				qemu = collectors.Start(ctx, collectors.Config{Interval: cfg.SampleInterval,
					Procs: func() []collectors.Proc { return []collectors.Proc{{Role: "qemu", PID: g.PID}} }})
			}
			raw, err := g.Call(ctx, opPoint, pointRequest{N: n, Trial: trial, Config: gcfg}, func(m json.RawMessage) {
				var p runner.Progress
				if cfg.Progress != nil && json.Unmarshal(m, &p) == nil {
					cfg.Progress(p)
				}
			})
			if err != nil {
				if qemu != nil {
					qemu.Stop()
				}
				return result.Point{Clients: n, Trial: trial}, fmt.Errorf("guest: %w", err)
			}
			var host []result.Sample
			if qemu != nil {
				host, _, _ = qemu.Stop()
			}
			if cfg.ProfileDir != "" {
				if err := fetchProfiles(ctx, g, cfg.ProfileDir); err != nil {
					fmt.Fprintf(out, "profiles: %v\n", err)
				}
			}
			var pt result.Point
			if err := json.Unmarshal(raw, &pt); err != nil {
				return pt, fmt.Errorf("guest sent an unreadable point: %w", err)
			}
			mergeHostSamples(&pt, host)
			if run.Environment.Device == nil {
				var dev struct{ Device *result.DeviceInfo }
				if r2, err := g.Call(ctx, opDevice, nil, nil); err == nil && json.Unmarshal(r2, &dev) == nil {
					run.Environment.Device = dev.Device
				}
			}
			return pt, nil
		}
		return measure, func() { g.Close() }, nil
	}
	return b, nil
}

// referenceRun records an independent tool's figures on the guest's device.
func referenceRun(ctx context.Context, g *softroce.Guest, run *result.Run, out io.Writer, device string) {
	tool, cmd, figs, rout, err := softroce.Reference(ctx, g)
	if err != nil {
		run.Environment.Reference = &result.Reference{Tool: tool, Command: cmd, Error: err.Error(), Output: rout}
		fmt.Fprintf(out, "reference: %s failed: %v\n", tool, err)
		return
	}
	run.Environment.Reference = &result.Reference{Tool: tool, Command: cmd, Figures: figs}
	fmt.Fprintf(out, "reference: %s on %s: %.1f µs/iter, %.1f Mbit/s\n", tool, device, figs["usec/iter"], figs["Mbit/sec"])
}

// opDevice reports the device the guest's last server opened.
const opDevice = "device"

func guestEnvironment(info softroce.Info) result.Environment {
	return result.Environment{
		OS: "Debian (rdmaprobe guest)", Kernel: info.KernelRelease, Arch: "amd64",
		CPUs: info.CPUs, MemoryBytes: info.MemTotalKiB * 1024,
	}
}

// shortRelease turns "6.1.0-56-amd64" into "6.1".
func shortRelease(r string) string {
	parts := strings.SplitN(r, ".", 3)
	if len(parts) < 2 {
		return r
	}
	return parts[0] + "." + strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
}

func memString(mib int) string {
	if mib%1024 == 0 {
		return fmt.Sprintf("%d GiB", mib/1024)
	}
	return fmt.Sprintf("%d MiB", mib)
}

// guestMain is PID 1 inside the guest: it serves probe points by running
// the server and load generators (this same binary) on rxe0.
func guestMain() {
	var last *result.DeviceInfo
	var certFile, keyFile, clientCertFile, clientKeyFile string
	softroce.GuestMain(func(ctx context.Context, op string, payload json.RawMessage, progress func(any)) (any, error) {
		switch op {
		case opPoint:
			var req pointRequest
			if err := json.Unmarshal(payload, &req); err != nil {
				return nil, err
			}
			if certFile == "" {
				var err error
				if certFile, keyFile, clientCertFile, clientKeyFile, err = guestCerts(); err != nil {
					return nil, err
				}
			}
			cfg := req.Config
			if cfg.ProfileDir != "" {
				cfg.ProfileDir = guestProfileDir
				if err := os.MkdirAll(guestProfileDir, 0o755); err != nil {
					return nil, err
				}
			}
			cfg.CertFile, cfg.KeyFile = certFile, keyFile
			cfg.ClientCertFile, cfg.ClientKeyFile = clientCertFile, clientKeyFile
			var lastSent time.Time
			cfg.Progress = func(p runner.Progress) {
				if time.Since(lastSent) > 250*time.Millisecond || p.Done == p.Clients {
					lastSent = time.Now()
					progress(p)
				}
			}
			r, err := runner.NewLocal(cfg)
			if err != nil {
				return nil, err
			}
			pt, err := r.RunPoint(ctx, req.N, req.Trial)
			if r.Device != nil {
				last = r.Device
			}
			if err != nil {
				return nil, err
			}
			return pt, nil
		case opDevice:
			return struct{ Device *result.DeviceInfo }{last}, nil
		case opProfiles:
			return takeProfiles(guestProfileDir)
		case opBench:
			return guestBench(ctx, payload, progress)
		}
		return nil, fmt.Errorf("unknown op %q", op)
	})
}

// guestCerts writes a server pair and a client pair for the guest's
// server and load generators.
func guestCerts() (certFile, keyFile, clientCertFile, clientKeyFile string, err error) {
	dir, err := os.MkdirTemp("", "certs")
	if err != nil {
		return "", "", "", "", err
	}
	pair, err := certs.SelfSigned()
	if err != nil {
		return "", "", "", "", err
	}
	if certFile, keyFile, err = pair.WriteFiles(dir); err != nil {
		return "", "", "", "", err
	}
	cpair, err := certs.SelfSignedClient()
	if err != nil {
		return "", "", "", "", err
	}
	clientCertFile, clientKeyFile = filepath.Join(dir, "client-cert.pem"), filepath.Join(dir, "client-key.pem")
	if err := cpair.WriteFilesAs(clientCertFile, clientKeyFile); err != nil {
		return "", "", "", "", err
	}
	return certFile, keyFile, clientCertFile, clientKeyFile, nil
}

// mergeHostSamples adds the host's QEMU readings to the guest sample
// nearest in time (both count seconds from their own start of the point).
func mergeHostSamples(pt *result.Point, host []result.Sample) {
	if len(pt.Samples) == 0 {
		return
	}
	j := 0
	for _, h := range host {
		for j+1 < len(pt.Samples) && pt.Samples[j+1].T <= h.T {
			j++
		}
		pt.Samples[j].Procs = append(pt.Samples[j].Procs, h.Procs...)
	}
}

// takeProfiles reads and removes the profiles in dir (inside the guest).
func takeProfiles(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
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

// fetchProfiles copies the guest's profiles of the last point into dir on
// the host.
func fetchProfiles(ctx context.Context, g *softroce.Guest, dir string) error {
	raw, err := g.Call(ctx, opProfiles, nil, nil)
	if err != nil {
		return fmt.Errorf("fetch from the guest: %w", err)
	}
	var files map[string][]byte
	if err := json.Unmarshal(raw, &files); err != nil {
		return fmt.Errorf("guest sent unreadable profiles: %w", err)
	}
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
