package exchange

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

func gid(s string) fabric.GID {
	var g fabric.GID
	if err := g.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return g
}

func TestRoundTrip(t *testing.T) {
	msgs := []Msg{
		{Type: Hello, QPN: 17, PSN: 0xabcdef, LID: 4433, MTU: fabric.MTU4096, GID: gid("::ffff:127.0.0.1")},
		{Type: Hello, QPN: 17, PSN: 0xabcdef, MTU: fabric.MTU4096, Logical: MaxLogical},
		{Type: Accept, QPN: 18, PSN: 5, MTU: fabric.MTU1024, Logical: 7},
		{Type: Accept, QPN: 0xffffff, PSN: 0, LID: 0, MTU: fabric.MTU1024, GID: gid("fe80::1")},
		{Type: Detached, QPN: 1, PSN: 0xffffff, LID: 3, MTU: fabric.MTU4096, GID: gid("::ffff:127.0.0.1")},
		{Type: Refuse, Reason: ReasonAtCapacity},
		{Type: Refuse, Reason: "ibv_create_qp: ENOMEM (cannot allocate memory)"},
		{Type: Accept, QPN: 9, PSN: 7, MTU: fabric.MTU1024, Remote: Remote{Addr: 0x7f00deadbeef, RKey: 0x1234, Len: 4096}},
		{Type: Detached, QPN: 9, PSN: 7, MTU: fabric.MTU1024, Remote: Remote{Addr: 0, RKey: 0, Len: 64}},
		{Type: Hello, QPN: 17, PSN: 5, LID: 1, MTU: fabric.MTU1024, GID: gid("::ffff:127.0.0.1"), QKey: 0x12345678},
		{Type: Accept, QPN: 18, MTU: fabric.MTU1024, QKey: 0x7fffffff, Remote: Remote{Addr: 1, RKey: 2, Len: 3}},
	}
	for _, m := range msgs {
		var buf bytes.Buffer
		if err := Write(&buf, m); err != nil {
			t.Fatalf("write %+v: %v", m, err)
		}
		got, err := Read(&buf)
		if err != nil {
			t.Fatalf("read %+v: %v", m, err)
		}
		if got != m {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
		if buf.Len() != 0 {
			t.Errorf("%d bytes left over", buf.Len())
		}
	}
}

func frame(body []byte) []byte {
	return append([]byte{byte(len(body) >> 8), byte(len(body))}, body...)
}

func TestRejects(t *testing.T) {
	good, _ := Encode(Msg{Type: Hello, QPN: 5, PSN: 9, MTU: fabric.MTU1024})
	mutate := func(f func(b []byte) []byte) []byte {
		c := append([]byte(nil), good...)
		return f(c)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "EOF"},
		{"header only", []byte{0, 10}, "unexpected EOF"},
		{"truncated body", good[:len(good)-3], "unexpected EOF"},
		{"oversized", []byte{0xff, 0xff}, "too large"},
		{"wrong version", mutate(func(b []byte) []byte { b[2] = 9; return b }), "unsupported exchange version 9"},
		{"unknown type", mutate(func(b []byte) []byte { b[3] = 77; return b }), "unknown message type 77"},
		{"zero QPN", mutate(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }), "invalid QPN"},
		{"QPN over 24 bits", mutate(func(b []byte) []byte { b[4] = 1; return b }), "invalid QPN"},
		{"PSN over 24 bits", mutate(func(b []byte) []byte { b[8] = 1; return b }), "invalid PSN"},
		{"bad MTU", mutate(func(b []byte) []byte { b[14] = 6; return b }), "invalid MTU 6"},
		{"reason length lies", mutate(func(b []byte) []byte { b[36] = 5; return b }), "does not match"},
		{"logical ID over 22 bits", mutate(func(b []byte) []byte { b[31] = 0x40; return b }), "invalid logical client ID"},
		{"short body", frame([]byte{Version, byte(Hello), 0}), "too short"},
		{"remote block in a hello", frame(append(append([]byte(nil), good[2:]...), 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 8)), "only an accept"},
		{"empty remote block", frame(func() []byte {
			b, _ := Encode(Msg{Type: Accept, QPN: 5, PSN: 9, MTU: fabric.MTU1024})
			return append(b[2:], make([]byte, 16)...)
		}()), "empty remote buffer"},
		{"remote block of 0 bytes", frame(func() []byte {
			b, _ := Encode(Msg{Type: Accept, QPN: 5, PSN: 9, MTU: fabric.MTU1024})
			return append(b[2:], 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0)
		}()), "remote buffer of 0 bytes"},
		{"trailing bytes", frame(append(append([]byte(nil), good[2:]...), 1, 2, 3)), "does not match"},
		{"refuse without reason", frame(func() []byte {
			b, _ := Encode(Msg{Type: Refuse, Reason: "x"})
			b = b[2 : len(b)-1]
			b[34] = 0
			return b
		}()), "without a reason"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.in))
			if err == nil {
				t.Fatalf("accepted malformed input")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestEncodeValidates(t *testing.T) {
	if _, err := Encode(Msg{Type: Hello, QPN: 1, MTU: 0}); err == nil {
		t.Error("encoded a Hello with MTU 0")
	}
	if _, err := Encode(Msg{Type: Refuse, Reason: strings.Repeat("x", MaxBody)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized reason: got %v", err)
	}
	if _, err := Read(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Errorf("empty reader: got %v, want EOF", err)
	}
}
