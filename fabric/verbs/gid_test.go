package verbs

import (
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

func TestIsIPv4Mapped(t *testing.T) {
	for _, tc := range []struct {
		gid  string
		want bool
	}{
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"fe80::200:ff:fe00:0", false},
		{"::1", false},
		{"2001:db8::ffff:7f00:1", false},
	} {
		var g fabric.GID
		if err := g.UnmarshalText([]byte(tc.gid)); err != nil {
			t.Fatal(err)
		}
		if got := isIPv4Mapped(g); got != tc.want {
			t.Errorf("%s: %v", tc.gid, got)
		}
	}
}

func TestParseSysfsGID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0000:0000:0000:0000:0000:ffff:7f00:0001\n", "::ffff:127.0.0.1", true},
		{"fe80:0000:0000:0000:0200:00ff:fe00:0000\n", "fe80::200:ff:fe00:0", true},
		{"0000:0000:0000:0000:0000:0000:0000:0000\n", "", false},
		{"garbage", "", false},
	} {
		g, ok := parseSysfsGID(tc.in)
		if ok != tc.ok || (ok && g.String() != tc.want) {
			t.Errorf("%q: %s %v", tc.in, g, ok)
		}
	}
}

func TestStubOrReal(t *testing.T) {
	p := New()
	if p.Name() != "verbs" || p.Simulated() {
		t.Errorf("provider %s simulated=%v", p.Name(), p.Simulated())
	}
	if !Supported() {
		if _, err := p.Devices(); err == nil {
			t.Error("stub lists devices")
		}
	}
}
