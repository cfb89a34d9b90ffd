package child

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// A generator that holds its clients for a staircase runs a traffic
// phase each time the runner asks, each with its own window, and adds
// the clients each step asks for between them, until its release.
func TestHoldRepeatedRounds(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	events := make(chan protocol.Event, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var ev protocol.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := watchRunner(bufio.NewReader(inR), cancel)
	held := 5
	phases := 0
	added := make(chan protocol.Add, 4)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		holdForRunner(ctx, client.TrafficConfig{Duration: time.Second}, protocol.NewEmitter(outW),
			lines, func(ctx context.Context, cfg client.TrafficConfig) result.Traffic {
				phases++
				cfg.Shared.Measured()
				<-cfg.Shared.End // the runner's end line for this phase
				return result.Traffic{Clients: held, Messages: int64(phases)}
			}, func(a protocol.Add) {
				held += a.N
				added <- a
			})
		outW.Close()
	}()
	send := func(line string) { io.WriteString(inW, line+"\n") }
	next := func(want string) protocol.Event {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Event != want {
				t.Fatalf("event %q, want %q", ev.Event, want)
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q event", want)
		}
		return protocol.Event{}
	}
	phase := func(clients int, messages int64) {
		t.Helper()
		send(protocol.StartTraffic)
		next("measured")
		send(protocol.EndTrafficWindow)
		if ev := next("traffic"); ev.Traffic == nil || ev.Traffic.Clients != clients || ev.Traffic.Messages != messages {
			t.Fatalf("traffic report %+v, want %d clients, phase %d", ev.Traffic, clients, messages)
		}
	}
	phase(5, 1)
	send(protocol.Add{N: 3, IDBase: 5, FailAllowance: 1}.Line())
	select {
	case a := <-added:
		if a != (protocol.Add{N: 3, IDBase: 5, FailAllowance: 1}) {
			t.Errorf("added %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the add line added no clients")
	}
	phase(8, 2)
	inW.Close() // the release
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("still holding after the release")
	}
}

func TestParseAdd(t *testing.T) {
	a := protocol.Add{N: 20000, IDBase: 40000, FailAllowance: 7}
	if got, ok := protocol.ParseAdd(a.Line() + "\n"); !ok || got != a {
		t.Errorf("ParseAdd(%q) = %+v, %v", a.Line(), got, ok)
	}
	for _, bad := range []string{"", protocol.StartTraffic, "add 1 2", "add -1 0 0", "add x 0 0", "127.0.0.1:4433"} {
		if _, ok := protocol.ParseAdd(bad); ok {
			t.Errorf("ParseAdd(%q) accepted", bad)
		}
	}
}
