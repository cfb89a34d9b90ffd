package fabric

import (
	"context"
	"fmt"
	"net"
)

// Provider opens devices. One per backend ("sim", "verbs").
type Provider interface {
	// Name is the backend name recorded in results ("sim", "verbs").
	Name() string
	// Simulated is true for fabrics whose numbers are not RDMA measurements.
	Simulated() bool
	// Devices lists device names the provider can open.
	Devices() ([]string, error)
	// Open opens a device context (ibv_open_device) and checks the port.
	Open(ctx context.Context, cfg DeviceConfig) (Device, error)
}

// DeviceConfig selects a device, port and GID index.
type DeviceConfig struct {
	Name     string // "" = first device
	Port     int    // 0 = 1
	GIDIndex int    // -1 = auto (first RoCE v2 IPv4-mapped GID, else 0)
	// Addr is the IPv4 address the simulated device's port has (its
	// wire listens there, and its GID is ::ffff:Addr), so simulated
	// QPs can connect across hosts; "" = 127.0.0.1. A real device's
	// addresses are its netdev's, and it ignores Addr.
	Addr string
}

// Caps are the device attributes that bound capacity (ibv_query_device).
type Caps struct {
	MaxQP      int    `json:"max_qp"`
	MaxQPWR    int    `json:"max_qp_wr"`
	MaxSGE     int    `json:"max_sge"`
	MaxCQ      int    `json:"max_cq"`
	MaxCQE     int    `json:"max_cqe"`
	MaxMR      int    `json:"max_mr"`
	MaxMRSize  uint64 `json:"max_mr_size"`
	MaxPD      int    `json:"max_pd"`
	MaxSRQ     int    `json:"max_srq"`
	MaxSRQWR   int    `json:"max_srq_wr"`
	MaxAH      int    `json:"max_ah,omitempty"`
	FWVersion  string `json:"fw_ver,omitempty"`
	VendorID   uint32 `json:"vendor_id,omitempty"`
	VendorPart uint32 `json:"vendor_part_id,omitempty"`
}

// FitsQP says why a QP with wr work requests on each queue, and a CQ
// that completes all of them, is more than c grants; nil when it fits or
// c does not say. what names the request in the error.
func (c Caps) FitsQP(wr int, what string) error {
	switch {
	case c.MaxQPWR > 0 && wr > c.MaxQPWR:
		return fmt.Errorf("%s asks %d work requests of a QP: the device grants %d (max_qp_wr)", what, wr, c.MaxQPWR)
	case c.MaxCQE > 0 && wr > c.MaxCQE:
		return fmt.Errorf("%s asks a CQ of %d entries: the device grants %d (max_cqe)", what, wr, c.MaxCQE)
	}
	return nil
}

// PortInfo is what ibv_query_port and ibv_query_gid report for the chosen port.
type PortInfo struct {
	Port      int    `json:"port"`
	State     string `json:"state"` // "ACTIVE", "DOWN", ...
	LID       uint16 `json:"lid"`
	ActiveMTU MTU    `json:"active_mtu"`
	GIDIndex  int    `json:"gid_index"`
	GID       GID    `json:"gid"`
	LinkLayer string `json:"link_layer"` // "Ethernet", "InfiniBand", "simulated"
}

// GID is a 128-bit global identifier (an IPv6 address on RoCE).
type GID [16]byte

// String renders the GID as IPv6, keeping the ::ffff: prefix of
// IPv4-mapped (RoCE v2) GIDs that net.IP would drop.
func (g GID) String() string {
	ip := net.IP(g[:])
	if v4 := ip.To4(); v4 != nil {
		return "::ffff:" + v4.String()
	}
	return ip.String()
}

// MarshalText renders the GID as an IPv6 address.
func (g GID) MarshalText() ([]byte, error) { return []byte(g.String()), nil }

// UnmarshalText parses an IPv6/IPv4-mapped address.
func (g *GID) UnmarshalText(b []byte) error {
	ip := net.ParseIP(string(b))
	if ip == nil {
		return fmt.Errorf("invalid GID %q", b)
	}
	copy(g[:], ip.To16())
	return nil
}

// MTU is an IB path MTU enum value, as in enum ibv_mtu (1=256 ... 5=4096).
type MTU int

const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 if invalid.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << int(m)
}

// Valid reports whether m is one of the five IB MTUs.
func (m MTU) Valid() bool { return m.Bytes() != 0 }

// Device is an open device context (struct ibv_context).
type Device interface {
	Name() string
	Caps() Caps
	Port() PortInfo
	AllocPD() (PD, error)
	// CreateCQ creates a completion queue with at least cqe entries.
	CreateCQ(cqe int) (CQ, error)
	// Close releases the context (ibv_close_device). Resources must be
	// destroyed first, as with verbs.
	Close() error
}

// CounterReader is a device that counts events as a NIC's port
// counters do, under the names a driver would give them (the sim's
// simulated send_rnr_err, rcvd_rnr_err, qp_cache_miss); a real device's
// are read from sysfs instead (collectors.PortCounters).
type CounterReader interface {
	Counters() map[string]uint64
}
