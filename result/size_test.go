package result_test

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/internal/rungen"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// recordBudget is the most a connected client's record may add to a
// saved run, gzipped: 50 MB for a million records, a climb to 500,000
// and the fresh point that confirms its wall.
const recordBudget = 50

// A run saves its clients' records within recordBudget bytes a client,
// gzipped, at the spread of values a run of thousands of clients has.
func TestRecordsFitTheBudget(t *testing.T) {
	const n = 20_000
	run := &result.Run{SchemaVersion: result.SchemaVersion, Tool: "rdmaprobe", Mode: "ramp",
		Points: []result.Point{{Clients: n, Records: rungen.Clients(rand.New(rand.NewPCG(1, 54)), n, 2)}}}
	p, err := result.SaveRun(t.TempDir(), run)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if per := float64(st.Size()) / n; per > recordBudget {
		t.Errorf("%d records saved as %d bytes: %.1f a client, want at most %d", n, st.Size(), per, recordBudget)
	} else {
		t.Logf("%d records saved as %d bytes: %.1f a client", n, st.Size(), per)
	}
}
