package client

import (
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Adopt makes client id of a QP that a connection manager creates and
// connects (client/rdmacm): create is given the dialer's PD and the
// attributes of the engine's own QPs (the client's shared CQ, its queue
// depths) and returns the QP, in INIT or later. The receive a built-in
// client has posted once connected is posted on it, so the QP can take a
// message as soon as the connection is established. The Conn then runs
// the traffic phase (Traffic) as any does; Close destroys the QP.
func (d *Dialer) Adopt(id int, create func(fabric.PD, fabric.QPInitAttr) (fabric.QP, error)) (*Conn, error) {
	if d.cfg.Mux > 0 || d.cfg.UD {
		return nil, fmt.Errorf("a connection manager's QP is an RC QP of its own: not a logical or UD client")
	}
	c := &Conn{id: id, bufs: d.bufs, msg: d.cfg.MsgSize, groups: d.groups, wcs: make(chan fabric.WC, 2*d.wr+2)}
	var err error
	if c.group, err = d.groups.join(); err != nil {
		return nil, err
	}
	if c.buf, err = d.bufs.get(); err != nil {
		c.Close()
		return nil, err
	}
	c.held = true
	c.qp, err = create(d.pd, fabric.QPInitAttr{Type: fabric.QPTypeRC, SendCQ: c.group.cq, RecvCQ: c.group.cq,
		MaxSendWR: d.wr, MaxRecvWR: d.wr, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		c.Close()
		return nil, err
	}
	c.group.bind(c.qp.QPN(), c)
	if err := c.postRecv(0, 0, d.cfg.MsgSize); err != nil {
		c.Close()
		return nil, fmt.Errorf("post receive: %w", err)
	}
	return c, nil
}

// Device is the device the dialer's clients are on.
func (d *Dialer) Device() fabric.Device { return d.dev }

// QPN is the client's QP number.
func (c *Conn) QPN() uint32 {
	if c.qp == nil {
		return 0
	}
	return c.qp.QPN()
}
