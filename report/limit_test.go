package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// A run re-rendered from its JSON reads its points: points that failed
// are not "nothing limited this run" because the run carries no diagnosis
// field (runs saved before the diagnosis existed, or with sampling off).
func TestLimitFromPointsWithoutDiagnosis(t *testing.T) {
	const saved = `{"schema_version": 1, "mode": "ramp", "backend": {"name": "vm"},
	  "config": {"threshold": 1, "client_timeout_sec": 30},
	  "points": [
	    {"clients": 100, "trial": 1, "attempted": 100, "connected": 100, "outcomes": {"ok": 100}},
	    {"clients": 200, "trial": 1, "attempted": 200, "connected": 170,
	     "outcomes": {"ok": 170, "timeout": 30}, "errors": {"deadline during rtr": 30}}
	  ],
	  "psn_check": {}, "complete": true}`
	var run result.Run
	if err := json.Unmarshal([]byte(saved), &run); err != nil {
		t.Fatal(err)
	}
	m := NewModel(&run)
	if m.Limit == nil || m.Limit.Limit != "timeout" || m.LimitAt != 200 {
		t.Fatalf("limit %+v at %d, want timeout at 200", m.Limit, m.LimitAt)
	}
	md, err := Markdown(m)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(md); strings.Contains(s, "No point failed") || !strings.Contains(s, "**timeout** at 200 clients: 30 clients hit their deadline") {
		t.Errorf("limiting factor of a run whose 200-client point failed:\n%s", s)
	}
}
