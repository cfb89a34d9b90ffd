// Package exchange is the connection-setup message carried over TLS between
// a client and the server: who I am on the fabric (QPN, PSN, GID, LID, MTU,
// and which logical client of that QP I am), or why the server will not take the client. Frames are length-prefixed
// and versioned so a malformed or foreign peer is rejected before any verbs
// resource is touched.
//
// Wire format (big endian):
//
//	u16 body length | u8 version | u8 type | u32 QPN | u32 PSN | u16 LID |
//	u8 MTU | 16 B GID | u32 logical ID | u16 reason length | reason bytes |
//	[u64 remote address | u32 rkey | u32 remote length] | [u32 Q_Key]
//
// The first bracketed block is present only in an Accept or Detached
// from a server that lets its clients RDMA WRITE and READ a buffer of its
// own (serve --remote): the client's region of that buffer. The second
// is present only between a client and a server of UD QPs (serve --mode
// ud): the QPN is then a UD QP's, and the Q_Key what a datagram to it
// must carry. Without them the frame is byte for byte what it was before
// the blocks, so a server that offers neither still speaks to clients
// built before them.
//
// Version 2 added the logical ID: in mux mode (server.ModeMux) several
// logical clients share one QP, so QPN, PSN, GID and LID no longer name
// one client; the ID (from 1; 0 = the QP's only client) tells them apart,
// in the hello, the accept and every message's payload (payload.MuxSeq).
package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// Version is the protocol version this build speaks.
const Version = 2

// MaxLogical is the highest logical client ID: the payload's sequence
// number carries it in 22 bits (payload.MuxSeq).
const MaxLogical = 1<<22 - 1

// MaxBody bounds a frame so a hostile peer cannot make us allocate much.
const MaxBody = 1024

const fixedLen = 1 + 1 + 4 + 4 + 2 + 1 + 16 + 4 + 2

// remoteLen and qkeyLen are the sizes of the optional blocks.
const (
	remoteLen = 8 + 4 + 4
	qkeyLen   = 4
)

// Type of a message.
type Type uint8

const (
	// Hello is the client's endpoint, sent once its QP is in INIT.
	Hello Type = 1
	// Accept is the server's endpoint; its QP is already in RTS.
	Accept Type = 2
	// Refuse says the server will not take the client; Reason says why.
	Refuse Type = 3
	// Detached is an Accept from a server that closes this connection
	// once it is written (serve --detach): the client closes its end too
	// and, when it leaves, says so over its QP with a goodbye message
	// (payload.Bye) instead of closing the connection.
	Detached Type = 4
)

// Refusal reasons the client classifies.
const (
	ReasonAtCapacity = "at capacity"
	// ReasonReplayed refuses a Hello whose endpoint (QPN, PSN, GID, LID)
	// the server already accepted once.
	ReasonReplayed = "replayed hello"
)

// Msg is one exchange message.
type Msg struct {
	Type Type
	QPN  uint32
	PSN  uint32
	LID  uint16
	MTU  fabric.MTU
	GID  fabric.GID
	// Logical is the logical client on the QP (Hello, Accept, Detached):
	// 0 for the QP's only client, from 1 for one of several sharing it
	// (mux mode); the accept repeats the hello's.
	Logical uint32
	Reason  string // Refuse only; "at capacity" or the server's error text
	// Remote is the client's region of a server buffer open to RDMA WRITE
	// and READ (Accept and Detached only; zero when the server offers
	// none).
	Remote Remote
	// QKey is the Q_Key of a UD QP (Hello, Accept and Detached of ud
	// mode; 0 for an RC QP).
	QKey uint32
}

// Remote names a region of registered memory a peer may RDMA WRITE and
// READ: its address in the owner's address space, its rkey, its length.
type Remote struct {
	Addr uint64
	RKey uint32
	Len  uint32
}

// Errors returned by Decode.
var (
	ErrVersion  = errors.New("unsupported exchange version")
	ErrTooLarge = errors.New("exchange message too large")
	ErrShort    = errors.New("exchange message too short")
)

// Validate checks field ranges: QPN and PSN are 24-bit, QPN non-zero, MTU
// one of the IB values. A Refuse carries only a reason.
func (m Msg) Validate() error {
	switch m.Type {
	case Hello, Accept, Detached:
		if m.QPN == 0 || m.QPN > 0xffffff {
			return fmt.Errorf("invalid QPN %#x", m.QPN)
		}
		if m.PSN > 0xffffff {
			return fmt.Errorf("invalid PSN %#x", m.PSN)
		}
		if !m.MTU.Valid() {
			return fmt.Errorf("invalid MTU %d", m.MTU)
		}
		if m.Logical > MaxLogical {
			return fmt.Errorf("invalid logical client ID %d (max %d)", m.Logical, MaxLogical)
		}
	case Refuse:
		if m.Reason == "" {
			return errors.New("refusal without a reason")
		}
	default:
		return fmt.Errorf("unknown message type %d", m.Type)
	}
	if m.Remote != (Remote{}) {
		if m.Type != Accept && m.Type != Detached {
			return fmt.Errorf("a remote buffer in message type %d (only an accept carries one)", m.Type)
		}
		if m.Remote.Len == 0 {
			return errors.New("remote buffer of 0 bytes")
		}
	}
	if m.QKey != 0 && m.Type == Refuse {
		return errors.New("a Q_Key in a refusal")
	}
	if len(m.Reason) > MaxBody-fixedLen-remoteLen-qkeyLen {
		return ErrTooLarge
	}
	return nil
}

// Encode returns the framed message.
func Encode(m Msg) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	body := fixedLen + len(m.Reason)
	if m.Remote != (Remote{}) {
		body += remoteLen
	}
	if m.QKey != 0 {
		body += qkeyLen
	}
	b := make([]byte, 2+body)
	binary.BigEndian.PutUint16(b, uint16(body))
	p := b[2:]
	p[0] = Version
	p[1] = byte(m.Type)
	binary.BigEndian.PutUint32(p[2:], m.QPN)
	binary.BigEndian.PutUint32(p[6:], m.PSN)
	binary.BigEndian.PutUint16(p[10:], m.LID)
	p[12] = byte(m.MTU)
	copy(p[13:29], m.GID[:])
	binary.BigEndian.PutUint32(p[29:], m.Logical)
	binary.BigEndian.PutUint16(p[33:], uint16(len(m.Reason)))
	copy(p[35:], m.Reason)
	if m.Remote != (Remote{}) {
		r := p[35+len(m.Reason):]
		binary.BigEndian.PutUint64(r, m.Remote.Addr)
		binary.BigEndian.PutUint32(r[8:], m.Remote.RKey)
		binary.BigEndian.PutUint32(r[12:], m.Remote.Len)
	}
	if m.QKey != 0 {
		binary.BigEndian.PutUint32(b[len(b)-qkeyLen:], m.QKey)
	}
	return b, nil
}

// Decode parses one frame body (without the length prefix).
func Decode(p []byte) (Msg, error) {
	if len(p) < 1 {
		return Msg{}, ErrShort
	}
	if p[0] != Version {
		return Msg{}, fmt.Errorf("%w %d (this build speaks %d)", ErrVersion, p[0], Version)
	}
	if len(p) < fixedLen {
		return Msg{}, ErrShort
	}
	m := Msg{
		Type: Type(p[1]),
		QPN:  binary.BigEndian.Uint32(p[2:]),
		PSN:  binary.BigEndian.Uint32(p[6:]),
		LID:  binary.BigEndian.Uint16(p[10:]),
		MTU:  fabric.MTU(p[12]),
	}
	copy(m.GID[:], p[13:29])
	m.Logical = binary.BigEndian.Uint32(p[29:])
	n := int(binary.BigEndian.Uint16(p[33:]))
	rest := len(p) - fixedLen - n
	if rest == qkeyLen || rest == remoteLen+qkeyLen {
		if m.QKey = binary.BigEndian.Uint32(p[len(p)-qkeyLen:]); m.QKey == 0 {
			return Msg{}, errors.New("empty Q_Key block")
		}
		rest -= qkeyLen
	}
	switch rest {
	case 0:
	case remoteLen:
		r := p[fixedLen+n:]
		m.Remote = Remote{Addr: binary.BigEndian.Uint64(r), RKey: binary.BigEndian.Uint32(r[8:]),
			Len: binary.BigEndian.Uint32(r[12:])}
		if m.Remote == (Remote{}) {
			return Msg{}, errors.New("empty remote buffer block")
		}
	default:
		return Msg{}, fmt.Errorf("exchange reason length %d does not match frame (%d bytes)", n, len(p))
	}
	m.Reason = string(p[35 : 35+n])
	if err := m.Validate(); err != nil {
		return Msg{}, err
	}
	return m, nil
}

// Write encodes m and writes it to w.
func Write(w io.Writer, m Msg) error {
	b, err := Encode(m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Read reads one frame from r and decodes it.
func Read(r io.Reader) (Msg, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Msg{}, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n > MaxBody {
		return Msg{}, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLarge, n, MaxBody)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Msg{}, err
	}
	return Decode(body)
}
