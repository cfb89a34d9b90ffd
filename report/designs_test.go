package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func designRun(designs ...string) *result.Run {
	pt := func(design string, n, connected int) result.Point {
		return result.Point{Design: design, Clients: n, Trial: 1, Attempted: n, Connected: connected,
			Outcomes: map[string]int{result.OutcomeOK: connected, result.OutcomeRefused: n - connected}}
	}
	return &result.Run{Mode: "ramp", Config: result.Config{Threshold: 1, ResourceMode: strings.Join(designs, ","), Designs: designs},
		Points: []result.Point{pt("per-client", 10, 10), pt("srq", 10, 10), pt("per-client", 20, 15), pt("srq", 20, 20)}}
}

// The table says "≥" of a design that passed every count tested, and
// names the count a design failed at.
func TestDesignRows(t *testing.T) {
	rows := DesignRows(designRun("per-client", "srq"))
	if len(rows) != 2 || rows[0].MaxConnected != "10" || rows[1].MaxConnected != "≥ 20" || rows[0].MaxSustainable != "–" ||
		!strings.HasSuffix(rows[0].Limit, " at 20") || rows[1].Limit != "nothing, within the counts tested" {
		t.Errorf("rows %+v", rows)
	}
}

// A run of one design prints as before, with no design table.
func TestTerminalOneDesignHasNoDesignTable(t *testing.T) {
	r := designRun("per-client")
	r.Config.Designs = nil
	r.Points = r.Points[:1]
	var b bytes.Buffer
	if err := Terminal(&b, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Capacity by server design") || strings.Contains(b.String(), "Design per-client") {
		t.Errorf("one design printed as several:\n%s", b.String())
	}
	b.Reset()
	if err := Terminal(&b, designRun("per-client", "srq")); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, "Design per-client:") || !strings.Contains(s, "Design srq:") || !strings.Contains(s, "Capacity by server design:") {
		t.Errorf("two designs:\n%s", s)
	}
}

// A ud design's objects name its address handles, which the RC designs
// do not hold.
func TestDesignRowsNameAddressHandles(t *testing.T) {
	r := designRun("srq", "ud")
	for i := range r.Points {
		p := &r.Points[i]
		if p.Design == "per-client" {
			p.Design = "ud"
		}
		p.Server.Resources = map[string]int{"qp": p.Connected, "cq": 2, "mr": 1}
		if p.Design == "ud" {
			p.Server.Resources = map[string]int{"qp": 1, "cq": 2, "mr": 1, "ah": p.Connected}
		}
	}
	rows := DesignRows(r)
	if len(rows) != 2 || strings.Contains(rows[0].Objects, "AH") || !strings.HasSuffix(rows[1].Objects, ", 1 AH") {
		t.Errorf("rows %+v", rows)
	}
}
