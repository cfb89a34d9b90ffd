package vm

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/soak"
)

// Soak runs a soak inside the guest, server and clients on rxe0.
func (g *Guest) Soak(ctx context.Context, cfg soak.Config, sample func(soak.Sample)) (*soak.Result, error) {
	raw, err := g.g.Call(ctx, OpSoak, cfg, func(m json.RawMessage) {
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
