package protocol

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
)

// The server's and the generators' specs refuse, in their flags' words,
// what serve and clients could not run, whoever built the spec.
func TestSpecChecks(t *testing.T) {
	srv := func(f func(*ServerSpec)) ServerSpec {
		s := ServerSpec{MsgSize: 64, HandshakeTimeout: time.Second, ExchangeTimeout: time.Second, Depth: 1}
		f(&s)
		return s
	}
	gen := func(f func(*GeneratorSpec)) GeneratorSpec {
		g := GeneratorSpec{MsgSize: 64, Rounds: 1, Timeout: time.Second}
		f(&g)
		return g
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{srv(func(*ServerSpec) {}).Check(), ""},
		{srv(func(s *ServerSpec) { s.MsgSize = 4 }).Check(), "--msg-size 4 bytes"},
		{srv(func(s *ServerSpec) { s.Backlog = -1 }).Check(), "--backlog -1: want 0 or more"},
		{srv(func(s *ServerSpec) { s.ExchangeTimeout = 0 }).Check(), "--exchange-timeout 0s: want more than 0"},
		{srv(func(s *ServerSpec) { s.Depth = 0 }).Check(), "--depth 0: want 1 to 1024"},
		{srv(func(s *ServerSpec) { s.BusyPoll = 2 * time.Second }).Check(), "--busy-poll 2s: want 0 (off) to 1s"},
		{gen(func(*GeneratorSpec) {}).Check(), ""},
		{gen(func(g *GeneratorSpec) { g.Rounds = 0 }).Check(), "--rounds 0: want 1 or more"},
		{gen(func(g *GeneratorSpec) { g.InFlight = -1 }).Check(), "--inflight -1"},
		{gen(func(g *GeneratorSpec) { g.Timeout = 0 }).Check(), "--timeout 0s: want more than 0"},
		{gen(func(g *GeneratorSpec) { g.Rate = -1 }).Check(), "--connect-rate -1"},
		{gen(func(g *GeneratorSpec) {
			g.Traffic = client.TrafficConfig{Duration: time.Second, Depth: 1, Op: "atomic"}
		}).Check(), `--op "atomic"`},
		{gen(func(g *GeneratorSpec) { g.Traffic = client.TrafficConfig{Duration: time.Second, Depth: 2000} }).Check(), "--depth 2000"},
		{gen(func(g *GeneratorSpec) { g.Traffic = client.TrafficConfig{Duration: -time.Second} }).Check(), "--traffic -1s"},
		// No phase: its depth and op are nobody's.
		{gen(func(g *GeneratorSpec) { g.Traffic = client.TrafficConfig{Op: "atomic"} }).Check(), ""},
	} {
		if tc.want == "" && tc.err != nil || tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)) {
			t.Errorf("%v, want %q", tc.err, tc.want)
		}
	}
}

func TestServerCommandCheck(t *testing.T) {
	good := ServerCommand{Argv: []string{"srv", "-p", "{port}", "-n", "{max}", "{build}/x"}, Build: []string{"make", "N={n}", "OUT={build}"}}
	if err := good.Check(); err != nil {
		t.Errorf("good command: %v", err)
	}
	for _, bad := range []ServerCommand{
		{},
		{Argv: []string{"srv", "{i}"}},
		{Argv: []string{"srv"}, Build: []string{"make", "{port}"}},
		{Argv: []string{"srv"}, Ready: "("},
		{Argv: []string{"srv"}, Port: 70000},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if g := (&ServerCommand{}).Grace(); g != 10*time.Second {
		t.Errorf("default grace %v", g)
	}
}
