package soak

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/fabric/sim"
	"github.com/rdmaprobe/rdmaprobe/server"
)

func TestConfigCheck(t *testing.T) {
	ok := Config{Duration: time.Minute, Interval: time.Second, Wave: 10, MaxClients: 10, Mode: server.ModeUD}
	if err := ok.Check(); err != nil {
		t.Fatalf("a soak that can run: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"empty wave", func(c *Config) { c.Wave = 0 }, "--wave 0"},
		{"wave above the server's cap", func(c *Config) { c.Wave = 11 }, "at most --max-clients (10)"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "--soak-duration and --interval"},
		{"negative interval", func(c *Config) { c.Interval = -time.Second }, "--soak-duration and --interval"},
		{"unknown mode", func(c *Config) { c.Mode = "bogus" }, "--mode"},
		{"mux", func(c *Config) { c.Mode = server.ModeMux }, "a QP each"},
	} {
		c := ok
		tc.edit(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// growth is the least-squares slope per 100,000 clients served, leaving
// the first (warm-up) sample out; too few samples give none.
func TestGrowth(t *testing.T) {
	s := []Sample{
		{Served: 100, RSSBytes: 900_000_000, RetainedHeapBytes: 1}, // warm-up: left out
		{Served: 1000, RSSBytes: 10_000_000, RetainedHeapBytes: 5_000_000},
		{Served: 2000, RSSBytes: 10_100_000, RetainedHeapBytes: 5_000_000},
		{Served: 3000, RSSBytes: 10_200_000, RetainedHeapBytes: 5_000_000},
	}
	rss, heap := growth(s)
	if math.Abs(rss-10_000_000) > 1e-3 || heap != 0 {
		t.Errorf("rss %.3f heap %.3f per 100k, want 10,000,000 and 0", rss, heap)
	}
	if rss, heap := growth(s[:2]); rss != 0 || heap != 0 {
		t.Errorf("two samples gave a slope: %v %v", rss, heap)
	}
	flat := []Sample{{Served: 5}, {Served: 5, RSSBytes: 1}, {Served: 5, RSSBytes: 2}}
	if rss, _ := growth(flat); rss != 0 {
		t.Errorf("no clients served between samples gave slope %v", rss)
	}
}

// A server that dies before it is ready fails the soak with what it
// wrote to its standard error, and a soak that cannot run starts nothing.
func TestRunServerFailsToStart(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "serve")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho \"serve: --max-clients: bad value\" >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Duration: time.Minute, Interval: time.Second, Wave: 1, MaxClients: 1, Mode: server.ModeUD, Exe: exe}
	_, err := Run(context.Background(), sim.New(sim.Options{}), cfg, func(Sample) { t.Error("a sample without a server") })
	if err == nil || !strings.Contains(err.Error(), "serve exited before it was ready") || !strings.Contains(err.Error(), "--max-clients: bad value") {
		t.Errorf("got %v, want the server's own error", err)
	}
	cfg.Wave = 0
	cfg.Exe = filepath.Join(t.TempDir(), "absent")
	if _, err := Run(context.Background(), sim.New(sim.Options{}), cfg, nil); err == nil || !strings.Contains(err.Error(), "--wave") {
		t.Errorf("bad config: %v, want the check's refusal", err)
	}
}
