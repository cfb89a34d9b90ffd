package runner

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Climbing generators: the first round's clients, then each "add N BASE
// ALLOWANCE" line's, IDs from BASE; clients from ID 12 on are refused, a
// wall at 12. Each generator writes its PID to a file, so the test can
// tell that the climb kept the same processes.
const climbingClients = `echo '{"event":"ready"}'
read -r addr || exit 0
echo $$ >> "$PIDS"
emit() {
  recs=""
  ok=0
  for ((i=0;i<$1;i++)); do
    id=$(($2+i)); o=ok; [ $id -ge 12 ] && o=refused-at-capacity || ok=$((ok+1))
    [ -n "$recs" ] && recs="$recs,"
    recs="$recs{\"id\":$id,\"proc\":$proc,\"outcome\":\"$o\",\"connect_us\":1500}"
  done
  echo "{\"event\":\"done\",\"ok\":$ok,\"records\":[$recs]}"
}
emit $n $base
while read -r line; do
  case "$line" in add\ *) set -- $line; emit $2 $3 ;; esac
done`

// A staircase keeps its server and generators: each step adds its
// clients on top of those held, with IDs that go on from the last
// step's, records only its own clients and counts the climb's totals;
// the step past the wall counts what it held at once.
func TestClimbAddsOnTop(t *testing.T) {
	// The fake server never answers a step's request for its own view:
	// each step would wait the whole usageTimeout for it.
	defer func(d time.Duration) { usageTimeout = d }(usageTimeout)
	usageTimeout = 300 * time.Millisecond
	pids := t.TempDir() + "/pids"
	t.Setenv("PIDS", pids)
	r := newRunner(t, fake(t, goodServer, climbingClients), 2)
	ctx := context.Background()
	var steps []result.Point
	for _, n := range []int{5, 10, 15} {
		pt, err := r.Climb(ctx, n, 15)
		if err != nil {
			t.Fatalf("climb to %d: %v", n, err)
		}
		steps = append(steps, pt)
	}
	if err := r.Descend(); err != nil {
		t.Fatal(err)
	}
	type got struct {
		clients, held, attempted, connected, records, firstID int
		passed, cumulative                                    bool
	}
	var gots []got
	for _, p := range steps {
		g := got{p.Clients, p.Held, p.Attempted, p.Connected, len(p.Records), -1, p.Passed, p.Cumulative}
		if len(p.Records) > 0 {
			g.firstID = p.Records[0].ID
		}
		gots = append(gots, g)
	}
	want := []got{
		{5, 0, 5, 5, 5, 0, true, true},
		{10, 5, 10, 10, 5, 5, true, true},
		{15, 10, 15, 12, 5, 10, false, true},
	}
	for i := range want {
		if gots[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i+1, gots[i], want[i])
		}
	}
	if o := steps[2].Outcomes; o[result.OutcomeOK] != 12 || o[result.OutcomeRefused] != 3 {
		t.Errorf("the last step's outcomes %v: want the climb's 12 ok and 3 refused", o)
	}
	if f := strings.Fields(readFile(t, pids)); len(f) != 2 {
		t.Errorf("generator processes over the climb: %v, want the same 2 for every step", f)
	}
	// A climb after the descent starts afresh.
	pt, err := r.Climb(ctx, 4, 4)
	if err != nil || pt.Held != 0 || pt.Connected != 4 || len(pt.Records) != 4 {
		t.Errorf("a new climb's first step: %+v, %v", pt, err)
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	if f := strings.Fields(readFile(t, pids)); len(f) != 4 {
		t.Errorf("generator processes: %v, want 2 more for the new climb", f)
	}
	for _, p := range strings.Fields(readFile(t, pids)) {
		pid, _ := strconv.Atoi(p)
		if alive(pid) {
			t.Errorf("generator %d still runs after the descent", pid)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// alive says whether process pid still exists (reaped ones do not).
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }
