package result

import "testing"

func TestCheckPSNs(t *testing.T) {
	rec := func(l, r uint32, ok bool) ClientRecord {
		o := OutcomeOK
		if !ok {
			o = OutcomeTLS
		}
		return ClientRecord{Outcome: o, LocalPSN: l, RemotePSN: r}
	}
	logical := func(l, r uint32, proc int, qpn, id uint32) ClientRecord {
		return ClientRecord{Outcome: OutcomeOK, LocalPSN: l, RemotePSN: r, Proc: proc, LocalQPN: qpn, Logical: id}
	}
	tests := []struct {
		name    string
		recs    []ClientRecord
		conns   int
		dupPair int
		repeat  int
		unique  bool
	}{
		{"all distinct", []ClientRecord{rec(1, 2, true), rec(3, 4, true)}, 2, 0, 0, true},
		{"value repeats, pairs distinct", []ClientRecord{rec(1, 2, true), rec(1, 3, true)}, 2, 0, 1, true},
		{"pair repeats", []ClientRecord{rec(1, 2, true), rec(1, 2, true), rec(5, 6, true)}, 3, 1, 2, false},
		{"failed clients ignored", []ClientRecord{rec(1, 2, true), rec(1, 2, false)}, 1, 0, 0, true},
		// Logical clients of one QP share its connection: it counts once,
		// but two QPs with one pair are a repeat.
		{"logical clients of a QP", []ClientRecord{logical(1, 2, 0, 7, 1), logical(1, 2, 0, 7, 2), logical(1, 2, 1, 7, 1), logical(1, 2, 0, 8, 1)}, 3, 2, 4, false},
	}
	for _, tc := range tests {
		c := CheckPSNs([]Point{{Records: tc.recs}})
		if c.Connections != tc.conns || c.DuplicatePairs != tc.dupPair || c.RepeatedPSNs != tc.repeat || c.Unique != tc.unique {
			t.Errorf("%s: got %+v", tc.name, c)
		}
	}
	// ud clients get no PSN from the server: not connections to check.
	if c := CheckPSNs([]Point{{Design: "ud", Records: []ClientRecord{rec(1, 0, true), rec(1, 0, true)}}, {Records: []ClientRecord{rec(1, 2, true)}}}); c.Connections != 1 || !c.Unique {
		t.Errorf("ud records counted: %+v", c)
	}
	if c := CheckPSNs([]Point{{Records: []ClientRecord{rec(1, 2, true)}}}); c.ExpectedRepeats <= 0 || c.ExpectedRepeats > 1e-6 {
		t.Errorf("expected repeats for 2 draws: %g", c.ExpectedRepeats)
	}
}
