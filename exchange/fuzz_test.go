package exchange

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary frame bodies to Decode: it must never panic,
// and whatever it accepts must encode back to exactly the same bytes.
func FuzzDecode(f *testing.F) {
	for _, m := range []Msg{
		{Type: Hello, QPN: 0x11, PSN: 0x123456, LID: 0, MTU: 3, GID: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}},
		{Type: Accept, QPN: 0xffffff, PSN: 0, LID: 7, MTU: 5},
		{Type: Hello, QPN: 0x11, PSN: 2, MTU: 3, Logical: 12},
		{Type: Refuse, Reason: ReasonAtCapacity},
		{Type: Accept, QPN: 0x12, PSN: 1, MTU: 5, Remote: Remote{Addr: 1 << 40, RKey: 0x2301, Len: 4096}},
	} {
		b, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[2:])
	}
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Add([]byte{Version + 1, byte(Hello)})
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Decode(body)
		if err != nil {
			if m != (Msg{}) {
				t.Fatalf("Decode returned %+v alongside error %v", m, err)
			}
			return
		}
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("Decode accepted %x as %+v but Encode refuses it: %v", body, m, err)
		}
		if !bytes.Equal(b[2:], body) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", body, b[2:])
		}
		if int(b[0])<<8|int(b[1]) != len(body) {
			t.Fatalf("length prefix %d for a %d-byte body", int(b[0])<<8|int(b[1]), len(body))
		}
		got, err := Read(bytes.NewReader(b))
		if err != nil || got != m {
			t.Fatalf("Read of the re-encoded frame: %+v, %v; want %+v", got, err, m)
		}
	})
}
