// Package payload builds and checks the checksummed messages that clients
// send and the server echoes: a client counts as connected only after a
// round trip whose echo verifies.
//
// Layout: u64 sequence | u32 CRC-32C of the rest | filler bytes.
package payload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// HeaderLen is the size of sequence + checksum.
const HeaderLen = 12

// Bye is the sequence number of a goodbye: the message a client sends
// over its QP when it leaves a server that closed the control connection
// (exchange.Detached). It is never echoed. Round-trip messages count from
// 1, so no echo is mistaken for it.
const Bye = ^uint64(0)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fill writes message seq of length n into b (len(b) >= n >= HeaderLen).
// The filler depends on seq so a stale or misrouted buffer fails the check.
// It is a 64-bit xorshift written 8 bytes at a time: the traffic phase
// fills every message, and a byte at a time cost the load generator most
// of its CPU in the TCG guest.
func Fill(b []byte, seq uint64, n int) {
	b = b[:n]
	binary.BigEndian.PutUint64(b, seq)
	x := seq*0x9e3779b97f4a7c15 + 1
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	i := HeaderLen
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], next())
	}
	for v := next(); i < n; i++ {
		b[i], v = byte(v), v>>8
	}
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[HeaderLen:], castagnoli))
}

// Seq is the sequence number in b's header, unchecked: for a receiver
// that compares the whole message with what it sent.
func Seq(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// ErrShort is returned for a message smaller than the header.
var ErrShort = errors.New("payload shorter than its header")

// Check verifies b's checksum and returns its sequence number.
func Check(b []byte) (uint64, error) {
	if len(b) < HeaderLen {
		return 0, ErrShort
	}
	want := binary.BigEndian.Uint32(b[8:])
	if got := crc32.Checksum(b[HeaderLen:], castagnoli); got != want {
		return 0, fmt.Errorf("payload checksum mismatch: %08x != %08x", got, want)
	}
	return binary.BigEndian.Uint64(b), nil
}

// RegionSeq is the sequence number a server that lends its clients a
// buffer for RDMA READ (serve --remote) fills slot j of a client's region
// with, qpn being the server's QP for that client: a client that reads
// its slot can tell it from another client's region, or from memory the
// server never filled. Never Bye, never a round trip's small number.
func RegionSeq(qpn uint32, j int) uint64 { return 1<<62 | uint64(qpn)<<20 | uint64(j)&(1<<20-1) }
