package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/rdmaprobe/rdmaprobe/soak"
)

// opSoak runs a soak in the guest: soak.Config → soak.Result, with
// soak.Sample messages meanwhile.
const opSoak = "soak"

// Soak runs `serve` from this binary on f for a soak, its clients in
// this process on the same fabric.
func Soak(ctx context.Context, f Fabric, cfg soak.Config, sample func(soak.Sample)) (*soak.Result, error) {
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

// Soak runs a soak inside the guest, server and clients on rxe0.
func (g *Guest) Soak(ctx context.Context, cfg soak.Config, sample func(soak.Sample)) (*soak.Result, error) {
	raw, err := g.g.Call(ctx, opSoak, cfg, func(m json.RawMessage) {
		var s soak.Sample
		if json.Unmarshal(m, &s) == nil {
			sample(s)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	var res soak.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("guest sent an unreadable soak: %w", err)
	}
	return &res, nil
}

// soakInGuest is the guest agent's side of opSoak.
func soakInGuest(ctx context.Context, payload json.RawMessage, progress func(any)) (any, error) {
	var cfg soak.Config
	if err := json.Unmarshal(payload, &cfg); err != nil {
		return nil, err
	}
	return Soak(ctx, Fabric{Backend: "verbs", GIDIndex: -1}, cfg, func(s soak.Sample) { progress(s) })
}
