package child

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// commandGenerator runs generateCommands as the runner does: its events
// come back on a channel, and release writes the server's address and
// close ends its stdin.
type commandGenerator struct {
	events  chan protocol.Event
	stdin   *io.PipeWriter
	errc    chan error
	release func(addr string)
}

func startCommands(t *testing.T, spec protocol.GeneratorSpec) *commandGenerator {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	g := &commandGenerator{events: make(chan protocol.Event, 16), stdin: inW, errc: make(chan error, 1)}
	g.release = func(addr string) { io.WriteString(inW, addr+"\n") }
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		g.errc <- generateCommands(ctx, spec, bufio.NewReader(inR), outW, true)
		outW.Close()
	}()
	go func() {
		defer close(g.events)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev protocol.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("event %q: %v", sc.Text(), err)
				continue
			}
			g.events <- ev
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
	})
	return g
}

// next is the next event other than progress.
func (g *commandGenerator) next(t *testing.T) protocol.Event {
	t.Helper()
	for ev := range g.events {
		if ev.Event != "progress" {
			return ev
		}
	}
	t.Fatal("the generator's events ended")
	return protocol.Event{}
}

// Held clients: the generator says ready, launches its clients against
// the address the release names, counts one connected when it prints its
// ok line and one failed by how it ended, and after its stdin closes lets
// the held ones go.
func TestGenerateCommandsHeld(t *testing.T) {
	script := `if [ {i} = 12 ]; then echo "refused: server full" >&2; exit 3; fi
echo "connected {i} of {n} to {addr} port {port}"
cat >/dev/null`
	g := startCommands(t, protocol.GeneratorSpec{N: 4, IDBase: 10, Proc: 2, Total: 9, Timeout: time.Minute,
		Command: &protocol.ClientCommand{Argv: []string{"sh", "-c", script}, OK: "^connected 1[0-3] of 9 to 127.0.0.1 port 4791$", Held: true}})
	if ev := g.next(t); ev.Event != "ready" {
		t.Fatalf("first event %+v, want ready", ev)
	}
	g.release("127.0.0.1:4791")
	done := g.next(t)
	if done.Event != "done" || done.OK != 3 || len(done.Records) != 4 {
		t.Fatalf("done event %+v: want 3 of 4 connected", done)
	}
	for i, rec := range done.Records {
		if rec.ID != 10+i || rec.Proc != 2 || rec.Command == nil {
			t.Errorf("record %d: id %d proc %d command %v", i, rec.ID, rec.Proc, rec.Command)
		}
		if rec.ID == 12 {
			if rec.Outcome != result.OutcomeExit || rec.Command.ExitCode != 3 || rec.Error != "exit status 3: refused: server full" {
				t.Errorf("failing client: %s %q (exit %d)", rec.Outcome, rec.Error, rec.Command.ExitCode)
			}
			continue
		}
		if rec.Outcome != result.OutcomeOK || rec.Error != "" || rec.ConnectUS <= 0 {
			t.Errorf("client %d: %s %q connect %d µs", rec.ID, rec.Outcome, rec.Error, rec.ConnectUS)
		}
	}
	// Still held: the generator returns only once the runner lets go.
	select {
	case err := <-g.errc:
		t.Fatalf("returned before the release: %v", err)
	default:
	}
	g.stdin.Close()
	if err := <-g.errc; err != nil {
		t.Fatal(err)
	}
}

// A launched client that neither exits nor says anything by the deadline
// is a timeout, said so, not a failure of another class.
func TestGenerateCommandsTimeout(t *testing.T) {
	g := startCommands(t, protocol.GeneratorSpec{N: 1, Total: 1, Timeout: 100 * time.Millisecond,
		Command: &protocol.ClientCommand{Argv: []string{"sleep", "60"}}})
	g.next(t)
	g.release("127.0.0.1:1")
	done := g.next(t)
	if len(done.Records) != 1 {
		t.Fatalf("done %+v", done)
	}
	if rec := done.Records[0]; rec.Outcome != result.OutcomeTimeout || !strings.HasPrefix(rec.Error, "no outcome before the deadline") {
		t.Errorf("stuck client: %s %q", rec.Outcome, rec.Error)
	}
	g.stdin.Close()
	if err := <-g.errc; err != nil {
		t.Fatal(err)
	}
}

// A template naming a placeholder that does not exist fails before any
// client starts, as an error event the runner shows.
func TestGenerateCommandsBadTemplate(t *testing.T) {
	g := startCommands(t, protocol.GeneratorSpec{N: 1, Total: 1, Timeout: time.Second,
		Command: &protocol.ClientCommand{Argv: []string{"client", "{host}"}}})
	ev := g.next(t)
	if ev.Event != "error" || !strings.Contains(ev.Error, "{host}") {
		t.Errorf("event %+v: want an error naming {host}", ev)
	}
	if err := <-g.errc; err == nil {
		t.Error("generator ran a template with an unknown placeholder")
	}
}

// By hand (no runner) the generator prints its counts, failures by class.
func TestGenerateCommandsByHand(t *testing.T) {
	var out strings.Builder
	spec := protocol.GeneratorSpec{N: 3, Total: 3, Addr: "127.0.0.1:7", Timeout: time.Minute,
		Command: &protocol.ClientCommand{Argv: []string{"sh", "-c", "exit $(( {i} % 2 ))"}}}
	if err := generateCommands(context.Background(), spec, bufio.NewReader(strings.NewReader("")), &out, false); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "2/3 clients connected, exit 1\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}
