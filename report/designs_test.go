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

// srqUDRun is designRun's run with its per-client points as ud's: srq
// and ud side by side.
func srqUDRun() *result.Run {
	r := designRun("srq", "ud")
	for i := range r.Points {
		if r.Points[i].Design == "per-client" {
			r.Points[i].Design = "ud"
		}
	}
	return r
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
	if err := Terminal(&b, r, 0); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Capacity by server design") || strings.Contains(b.String(), "Design per-client") {
		t.Errorf("one design printed as several:\n%s", b.String())
	}
	b.Reset()
	if err := Terminal(&b, designRun("per-client", "srq"), 0); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, "Design per-client:") || !strings.Contains(s, "Design srq:") || !strings.Contains(s, "Capacity by server design:") {
		t.Errorf("two designs:\n%s", s)
	}
}

// A ud design's objects name its address handles, which the RC designs
// do not hold.
func TestDesignRowsNameAddressHandles(t *testing.T) {
	r := srqUDRun()
	for i := range r.Points {
		p := &r.Points[i]
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

// The message rate is taken at the largest count with a traffic phase,
// and with several trials there (ramp in turns) it is their range, not
// the first trial's alone.
func TestDesignRowsRateOverTrials(t *testing.T) {
	r := designRun("srq", "ud")
	r.Config.Traffic = &result.TrafficSetup{Op: "send"}
	tr := func(rate float64) *result.Traffic { return &result.Traffic{Messages: 100, MsgRate: rate} }
	r.Points = []result.Point{
		{Design: "srq", Clients: 10, Trial: 1, Traffic: tr(5000)},
		{Design: "srq", Clients: 20, Trial: 1, Traffic: tr(3046)},
		{Design: "ud", Clients: 20, Trial: 1, Traffic: tr(2277)},
		{Design: "srq", Clients: 20, Trial: 2, Traffic: tr(3022)},
		{Design: "ud", Clients: 20, Trial: 2, Traffic: tr(2403)},
		{Design: "ud", Clients: 10, Trial: 1, Traffic: tr(9000)},
	}
	rows := DesignRows(r)
	if len(rows) != 2 || rows[0].Rate != "3022–3046 msg/s (at 20, 2 trials)" || rows[1].Rate != "2277–2403 msg/s (at 20, 2 trials)" {
		t.Errorf("rates %q, %q", rows[0].Rate, rows[1].Rate)
	}
	r.Points = r.Points[:3]
	if rows := DesignRows(r); rows[0].Rate != "3046 msg/s (at 20)" || rows[1].Rate != "2277 msg/s (at 20)" {
		t.Errorf("one trial: %q, %q", rows[0].Rate, rows[1].Rate)
	}
}

// A point that knew only the device's objects (no per-process split)
// says so: with the clients on the same device, its QPs per client
// count theirs too.
func TestDesignRowsSayDeviceWideObjects(t *testing.T) {
	r := srqUDRun()
	for i := range r.Points {
		p := &r.Points[i]
		if p.Design == "srq" {
			p.Peak = &result.Peak{RDMA: map[string]int{"qp": 2 * p.Connected, "cq": 2}}
		} else {
			p.Peak = &result.Peak{RDMA: map[string]int{"qp": 1 + p.Connected}, ByRole: map[string]map[string]int{"server": {"qp": 1, "cq": 2}}}
		}
	}
	rows := DesignRows(r)
	if len(rows) != 2 || !strings.HasSuffix(rows[0].Objects, "(the device's: server and clients together)") || strings.Contains(rows[1].Objects, "device's") {
		t.Errorf("objects %q, %q", rows[0].Objects, rows[1].Objects)
	}
}

// Each design's section sets its traffic against perftest over its own
// transport: ud's datagrams against -c UD, srq's RC QPs against RC.
func TestDesignSectionsReferenceTheirTransport(t *testing.T) {
	r := srqUDRun()
	r.Config.Traffic = &result.TrafficSetup{Op: "send"}
	for i := range r.Points {
		r.Points[i].Traffic = &result.Traffic{Messages: 100, MsgRate: 2000}
	}
	bw := func(transport string, rate float64) result.Reference {
		cmd := "ib_send_bw -s 64"
		if transport != "" {
			cmd = "ib_send_bw -c " + transport + " -s 64"
		}
		return result.Reference{Tool: "ib_send_bw", Command: cmd, When: result.ReferenceBefore, Transport: transport,
			Figures: map[string]float64{"msg/s": rate, "BW average": rate * 64 / 1e6}}
	}
	r.Environment.DataPath = []result.Reference{bw("", 11000), bw(result.TransportUD, 6600)}
	got := map[string]string{}
	for _, s := range designSections(r) {
		got[s.Design] = s.TrafficRef
	}
	if s := got["ud"]; !strings.Contains(s, "`ib_send_bw -c UD -s 64`: 6600 msg/s") || strings.Contains(s, "11000") {
		t.Errorf("ud's reference: %s", s)
	}
	if s := got["srq"]; !strings.Contains(s, "`ib_send_bw -s 64`: 11000 msg/s") || strings.Contains(s, "-c UD") {
		t.Errorf("srq's reference: %s", s)
	}
}
