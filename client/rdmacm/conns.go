package rdmacm

import (
	"context"
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Conns are the connections Run made, held until Close: clients of one
// engine (client.Dialer) on the device their addresses resolved to.
type Conns struct {
	cm     fabric.CM
	d      *client.Dialer
	conns  []conn
	idBase int
	proc   int
}

// dialer is the engine on id's device, made by the first connection
// that needs it. The engine has one device, as a built-in generator
// does: a connection whose address resolved to another fails.
func (h *Conns) dialer(id fabric.CMID, cfg client.Config) (*client.Dialer, error) {
	dev, err := id.Device()
	if err != nil {
		return nil, err
	}
	if h.d == nil {
		if h.d, err = client.NewDialer(dev, cfg); err != nil {
			return nil, err
		}
		return h.d, nil
	}
	if h.d.Device() != dev {
		return nil, fmt.Errorf("the address resolved to %s, and this generator's connections are on %s", dev.Name(), h.d.Device().Name())
	}
	return h.d, nil
}

// release frees what the attempt holds: the connection (told, if it was
// made), the engine's client and its QP, then the id.
func (c *conn) release(connected bool) {
	if c.id == nil {
		return
	}
	if connected {
		c.id.Disconnect()
	}
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
	c.id.Destroy()
	c.id = nil
}

// Held returns the engine's clients of the connections held.
func (h *Conns) Held() []*client.Conn {
	var held []*client.Conn
	for i := range h.conns {
		if c := &h.conns[i]; c.step == stepHeld && c.c != nil {
			held = append(held, c.c)
		}
	}
	return held
}

// Traffic runs the traffic phase of the held connections in the engine
// (client.Dialer.Traffic), for a server that posts receives and echoes
// each message back as it came (--cm-server-echoes).
func (h *Conns) Traffic(ctx context.Context, cfg client.TrafficConfig) result.Traffic {
	held := h.Held()
	if h.d == nil || len(held) == 0 {
		return result.Traffic{Op: result.OpSend, Depth: max(cfg.Depth, 1), RatePerClient: cfg.Rate}
	}
	return h.d.Traffic(ctx, held, cfg)
}

// Watch reads the event channel after Run, while the connections are
// held, until ctx ends: each held connection the other side closed
// (DISCONNECTED, or its device or address gone) is given to dropped as
// its client's record with outcome DISCONNECTED, once. A connection the
// server dropped while held is a failure of the point, whenever it
// came. Its QP is moved to the error state (rdma_disconnect); the
// connection itself is left to Close. Watch returns when ctx
// ends or the channel fails.
func (h *Conns) Watch(ctx context.Context, dropped func(result.ClientRecord)) {
	seen := map[int]bool{}
	for ctx.Err() == nil {
		ev, got, err := h.cm.Next(pollSlice)
		if err != nil {
			return
		}
		if !got {
			continue
		}
		i := int(ev.Ctx)
		if i < 0 || i >= len(h.conns) || h.conns[i].id != ev.ID || h.conns[i].step != stepHeld || seen[i] {
			continue
		}
		switch ev.Type {
		case fabric.CMDisconnected, fabric.CMDeviceRemoval, fabric.CMAddrChange:
			seen[i] = true
			// Answer the disconnect as librdmacm's examples do: the QP
			// goes to the error state and its posted work requests
			// flush, so a traffic phase in progress ends this client's
			// messages at once instead of waiting out --timeout.
			h.conns[i].id.Disconnect()
			dropped(result.ClientRecord{ID: h.idBase + i, Proc: h.proc, Outcome: result.OutcomeDisconnected,
				Error: ev.Type.String() + " while held, after every connection of the generator was made"})
		}
	}
}

// Close disconnects and frees every connection, then the engine; the
// CM is the caller's.
func (h *Conns) Close() {
	if h == nil {
		return
	}
	for i := range h.conns {
		c := &h.conns[i]
		c.release(c.step == stepHeld)
	}
	if h.d != nil {
		h.d.Close()
		h.d = nil
	}
}
