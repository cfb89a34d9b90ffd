package child

import (
	"context"
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// HostInfo describes this host for a run's record of its generator
// hosts (`rdmaprobe hostinfo`): its environment and the device f opens,
// with its caps and the GID the rules pick.
func HostInfo(ctx context.Context, f protocol.Fabric) (result.Environment, error) {
	env := collectors.Environment()
	p, err := f.Provider()
	if err != nil {
		return env, err
	}
	dev, err := p.Open(ctx, f.DeviceConfig())
	if err != nil {
		return env, fmt.Errorf("open device: %w", err)
	}
	defer dev.Close()
	env.Device = &result.DeviceInfo{Name: dev.Name(), Caps: dev.Caps(), Port: dev.Port()}
	return env, nil
}
