package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/runner"
)

// Without a terminal, a long point still says it is alive: one plain line
// per logEvery, none in between and none once every client is done.
func TestProgressLogsWithoutTTY(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf)
	p.start(1000, 1, 1)
	p.update(runner.Progress{Clients: 1000, Done: 10, OK: 10})
	if buf.Len() != 0 {
		t.Fatalf("wrote before logEvery: %q", buf.String())
	}
	p.last = time.Now().Add(-logEvery)
	p.update(runner.Progress{Clients: 1000, Done: 400, OK: 398})
	p.update(runner.Progress{Clients: 1000, Done: 410, OK: 408})
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "1000 clients: 400/1000 attempted, 398 connected after") || strings.Contains(got, "\033") {
		t.Fatalf("log output %q", got)
	}
	p.last = time.Now().Add(-logEvery)
	p.update(runner.Progress{Clients: 1000, Done: 1000, OK: 998})
	if strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("a line for a finished point: %q", buf.String())
	}
}
