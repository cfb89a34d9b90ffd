package runner

import (
	"context"
	"os"
	"strconv"

	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/soak"
)

// Soak runs `serve` from this binary on f for a soak, its clients in
// this process on the same fabric.
func Soak(ctx context.Context, f protocol.Fabric, cfg soak.Config, sample func(soak.Sample)) (*soak.Result, error) {
	p, err := f.Provider()
	if err != nil {
		return nil, err
	}
	if cfg.Exe, err = os.Executable(); err != nil {
		return nil, err
	}
	cfg.ServeArgs = []string{"--backend", f.Backend, "--gid-index", strconv.Itoa(f.GIDIndex)}
	if f.Device != "" {
		cfg.ServeArgs = append(cfg.ServeArgs, "--device", f.Device)
	}
	cfg.Device = f.DeviceConfig()
	cfg.Prepare = killOnParentDeath
	return soak.Run(ctx, p, cfg, sample)
}
