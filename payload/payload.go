// Package payload builds and checks the verified messages that clients
// send and the server echoes: a client counts as connected only after a
// round trip whose echo verifies.
//
// Layout: u64 sequence | u32 tag | filler. The filler is a 64-bit
// xorshift stream seeded by the sequence and the tag a 32-bit mix of it,
// so every byte of a message is a function of its sequence: a receiver
// checks a message by regenerating it from its first 8 bytes and
// comparing. A flipped bit anywhere, a stale or misrouted buffer, a
// truncated or shifted message all fail, and the check reports the first
// byte that differs.
//
// Regenerating replaced a CRC-32C of the filler. In the QEMU TCG guest
// (CPU model qemu64, which has no SSE4.2 crc32 instruction) Go's CRC runs
// a table per byte, and a 4 KiB message's CRC cost more than its
// regeneration and comparison; see BenchmarkCheck and results/README.md.
package payload

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderLen is the size of sequence + tag.
const HeaderLen = 12

// Bye is the sequence number of a goodbye: the message a client sends
// over its QP when it leaves a server that closed the control connection
// (exchange.Detached). It is never echoed. Round-trip messages count from
// 1, so no echo is mistaken for it.
const Bye = ^uint64(0)

// seed starts the filler stream of message seq of length n: the length
// is in it so that a message cut short (or run long) is a different
// stream, not a prefix that passes. Never 0, where xorshift would stay.
func seed(seq uint64, n int) uint64 {
	if x := seq*0x9e3779b97f4a7c15 ^ uint64(n)*0xd1b54a32d192ed03; x != 0 {
		return x
	}
	return 1
}

// next is the filler stream's next word (xorshift64).
func next(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// tag mixes seq into the header's 32-bit tag (splitmix64's finaliser),
// so a message of HeaderLen bytes, which has no filler, still checks its
// sequence.
func tag(seq uint64) uint32 {
	z := seq + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return uint32((z ^ z>>31) >> 32)
}

// Fill writes message seq of length n into b (len(b) >= n >= HeaderLen).
// The filler is written 8 bytes at a time: the traffic phase fills every
// message, and a byte at a time cost the load generator most of its CPU
// in the TCG guest.
func Fill(b []byte, seq uint64, n int) {
	b = b[:n]
	binary.BigEndian.PutUint64(b, seq)
	binary.BigEndian.PutUint32(b[8:], tag(seq))
	x := seed(seq, n)
	i := HeaderLen
	for ; i+8 <= n; i += 8 {
		x = next(x)
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	if i < n {
		for v := next(x); i < n; i++ {
			b[i], v = byte(v), v>>8
		}
	}
}

// Seq is the sequence number in b's header, unchecked: for a receiver
// that compares the whole message with what it sent.
func Seq(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// MaxSize bounds a message: far above what a message-rate test sends
// (perftest's -a stops at 8 MiB), and every client holds 2·depth such
// buffers on each side.
const MaxSize = 1 << 30

// CheckSize says why n bytes cannot be a message (a payload needs its
// header), or nil.
func CheckSize(n int) error {
	if n < HeaderLen || n > MaxSize {
		return fmt.Errorf("%d bytes: a message holds %d (its header: sequence number and tag) to %d", n, HeaderLen, MaxSize)
	}
	return nil
}

// ErrShort is returned for a message smaller than the header.
var ErrShort = errors.New("payload shorter than its header")

// Check verifies that b is message Seq(b) of length len(b), as Fill
// writes it, and returns its sequence number.
func Check(b []byte) (uint64, error) {
	if len(b) < HeaderLen {
		return 0, ErrShort
	}
	seq := binary.BigEndian.Uint64(b)
	if got, want := binary.BigEndian.Uint32(b[8:]), tag(seq); got != want {
		return 0, fmt.Errorf("payload tag %08x does not match its sequence %#x (want %08x)", got, seq, want)
	}
	// The comparison is folded into one word and looked at once: no
	// branch per word in the loop. Where it differs is found again only
	// for a message that fails.
	x := seed(seq, len(b))
	var diff uint64
	i := HeaderLen
	for ; i+8 <= len(b); i += 8 {
		x = next(x)
		diff |= binary.LittleEndian.Uint64(b[i:]) ^ x
	}
	if i < len(b) {
		for v := next(x); i < len(b); i++ {
			diff |= uint64(b[i] ^ byte(v))
			v >>= 8
		}
	}
	if diff != 0 {
		return 0, fmt.Errorf("payload of message %#x differs from it at byte %d of %d", seq, firstDiff(b, seq), len(b))
	}
	return seq, nil
}

// firstDiff is the offset of the first byte of b that differs from
// message seq of the same length.
func firstDiff(b []byte, seq uint64) int {
	want := make([]byte, len(b))
	Fill(want, seq, len(b))
	for i := range b {
		if b[i] != want[i] {
			return i
		}
	}
	return -1
}

// RegionSeq is the sequence number a server that lends its clients a
// buffer for RDMA READ (serve --remote) fills slot j of a client's region
// with, qpn being the server's QP for that client: a client that reads
// its slot can tell it from another client's region, or from memory the
// server never filled. Never Bye, never a round trip's small number.
func RegionSeq(qpn uint32, j int) uint64 { return 1<<62 | uint64(qpn)<<20 | uint64(j)&(1<<20-1) }

// LogicalBits is the width of the logical-client ID a mux-mode message
// carries in bits 40–61 of its sequence number (MuxSeq).
const LogicalBits = 22

// MuxSeq is the sequence number of round trip n (from 1, below 2^40) of
// logical client id on a QP several logical clients share (mux mode):
// the ID rides in the sequence, so the tag and the filler, which are
// functions of the whole sequence, vouch for it as for the count. A
// QP's only client sends ID 0, whose sequences are the plain counts.
func MuxSeq(id uint32, n uint64) uint64 {
	return uint64(id&(1<<LogicalBits-1))<<40 | n&(1<<40-1)
}

// Logical is the logical-client ID in sequence number seq (MuxSeq).
func Logical(seq uint64) uint32 { return uint32(seq>>40) & (1<<LogicalBits - 1) }
