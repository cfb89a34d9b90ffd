package fabric

import (
	"fmt"
	"net/netip"
	"time"
)

// CM is a connection manager's event channel (librdmacm's struct
// rdma_event_channel): the way rdma_cm clients reach a server by its IP
// address. Each connection is a CMID whose QP is created on the Device
// its address resolved to, with that device's PD and CQs, so once
// connected it is a QP like any other. Methods are called from one
// goroutine.
type CM interface {
	// Start creates an RC id (rdma_create_id, RDMA_PS_TCP) whose events
	// carry ctx, and resolves addr to a device (rdma_resolve_addr) within
	// timeout.
	Start(addr netip.AddrPort, timeout time.Duration, ctx uint64) (CMID, error)
	// Next waits up to wait for the channel's next event (rdma_get_cm_event,
	// acknowledged before it returns); false when none came.
	Next(wait time.Duration) (CMEvent, bool, error)
	// Close releases the devices the ids resolved to and the channel;
	// every id must be destroyed first.
	Close() error
}

// CMID is one rdma_cm connection (struct rdma_cm_id).
type CMID interface {
	// ResolveRoute resolves the route to the resolved address
	// (rdma_resolve_route).
	ResolveRoute(timeout time.Duration) error
	// Device is the device the address resolved to, opened on the
	// connection manager's own context of it (id->verbs): ids that
	// resolved to the same device share one Device. Valid once the
	// address is resolved, until CM.Close.
	Device() (Device, error)
	// CreateQP creates the id's RC QP (rdma_create_qp) on pd, a PD of
	// Device's; the connection manager moves it to INIT now and to RTR
	// and RTS when the connection is established. Its Destroy leaves the
	// id without a QP.
	CreateQP(pd PD, attr QPInitAttr) (QP, error)
	// Connect sends the connect request (rdma_connect) with privateData
	// (at most MaxCMPrivateData bytes).
	Connect(privateData []byte) error
	// Disconnect ends an established connection (rdma_disconnect): its
	// QP goes to the error state, and the server is told.
	Disconnect() error
	// Destroy releases the id (rdma_destroy_id), its QP first if that
	// still exists. Events of the id read before Destroy must have been
	// handled: none comes after.
	Destroy() error
}

// MaxCMPrivateData is the most private data an RC connect request
// carries over RoCE and InfiniBand: the CM REQ's 92 bytes less
// rdma_cm's header.
const MaxCMPrivateData = 56

// CMEvent is what a connection's event says (struct rdma_cm_event).
type CMEvent struct {
	ID CMID
	// Ctx is the ctx given to CM.Start.
	Ctx  uint64
	Type CMEventType
	// Status is the event's status: a negative errno for the error
	// events, the IB CM's reject reason for CMRejected.
	Status int
	// PrivateDataLen is how much private data came with it.
	PrivateDataLen int
	// RemoteQPN is the server's QP (CMEstablished).
	RemoteQPN uint32
}

// CMEventType mirrors enum rdma_cm_event_type.
type CMEventType int

const (
	CMAddrResolved CMEventType = iota
	CMAddrError
	CMRouteResolved
	CMRouteError
	CMConnectRequest
	CMConnectResponse
	CMConnectError
	CMUnreachable
	CMRejected
	CMEstablished
	CMDisconnected
	CMDeviceRemoval
	CMMulticastJoin
	CMMulticastError
	CMAddrChange
	CMTimewaitExit
)

var cmEventNames = [...]string{"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
	"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL", "RDMA_CM_EVENT_MULTICAST_JOIN",
	"RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT"}

// String is the event's name as rdma_event_str gives it.
func (t CMEventType) String() string {
	if t >= 0 && int(t) < len(cmEventNames) {
		return cmEventNames[t]
	}
	return fmt.Sprintf("RDMA_CM_EVENT(%d)", int(t))
}
