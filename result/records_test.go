package result

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// Records save as columns and read back as they were: a column only
// where a record has the field, ids only where they are not the index,
// a phase's null where a client did not reach it.
func TestRecordsColumns(t *testing.T) {
	recs := Records{
		{ID: 0, Outcome: OutcomeOK, PhasesUS: map[string]int64{PhaseTCP: 10, PhaseTLS: 0}, ConnectUS: 30, RTTsUS: []float64{1.5},
			LocalQPN: 17, RemoteQPN: 18, LocalPSN: 5, RemotePSN: 6},
		{ID: 1, Proc: 1, Outcome: OutcomeQPCreate, Error: "ibv_create_qp: ENOMEM", Errno: "ENOMEM", PhasesUS: map[string]int64{PhaseTCP: 12}},
		{ID: 2, Outcome: OutcomeExit, Command: &CommandRecord{ExitCode: 1, Tail: "bye"}, TLSResumed: true},
	}
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{`"outcome":["ok","qp-create","exit"]`, `"proc":[0,1,0]`, `"tls":[0,null,null]`,
		`"errno":["","ENOMEM",""]`, `"command":[null,null,{`} {
		if !strings.Contains(got, want) {
			t.Errorf("saved as %s\nwant %s in it", got, want)
		}
	}
	for _, absent := range []string{`"id"`, `"logical"`} {
		if strings.Contains(got, absent) {
			t.Errorf("saved as %s\nwith %s, whose values are all their default", got, absent)
		}
	}
	var back Records
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, recs) {
		t.Errorf("read back as %+v\nwant %+v", back, recs)
	}

	recs[1].ID = 7
	b, _ = json.Marshal(recs)
	if !strings.Contains(string(b), `"id":[0,7,2]`) {
		t.Errorf("ids not their index saved as %s", b)
	}
}

// A run saved before version 15 holds an array of records; it reads as
// it did. Columns of different lengths are refused, naming the column.
func TestRecordsReadOldAndRefuseTorn(t *testing.T) {
	var old Records
	if err := json.Unmarshal([]byte(` [{"id":3,"proc":1,"outcome":"ok","phases_us":{"tcp":5}}]`), &old); err != nil {
		t.Fatal(err)
	}
	if want := (Records{{ID: 3, Proc: 1, Outcome: OutcomeOK, PhasesUS: map[string]int64{PhaseTCP: 5}}}); !reflect.DeepEqual(old, want) {
		t.Errorf("old records read as %+v, want %+v", old, want)
	}
	var torn Records
	err := json.Unmarshal([]byte(`{"outcome":["ok","ok"],"local_psn":[1]}`), &torn)
	if err == nil || !strings.Contains(err.Error(), "local_psn has 1 values for 2 clients") {
		t.Errorf("torn columns: %v", err)
	}
	err = json.Unmarshal([]byte(`{"outcome":["ok"],"phases_us":{"tls":[1,2]}}`), &torn)
	if err == nil || !strings.Contains(err.Error(), "phases_us.tls has 2 values for 1 clients") {
		t.Errorf("torn phase column: %v", err)
	}
}
