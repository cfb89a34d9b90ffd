package result

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Records are a point's client attempts, one ClientRecord each. A run
// saves them as columns (RecordColumns), not an object per client:
// without a field name per value they are a third of the bytes, and gzip
// finds the repeats of a column; a run of half a million clients stays
// a file a report reads in seconds. Runs saved before schema version 15
// hold an array of objects, which Records reads too.
type Records []ClientRecord

// RecordColumns is how a point's records are saved: one array per field
// of ClientRecord, its i-th value the i-th client's. A column whose
// values are all zero, empty or false is absent, as the field was in a
// record of its own.
type RecordColumns struct {
	// ID is absent when every client's ID is its index.
	ID []int `json:"id,omitempty"`
	// Proc is the load generator that ran the client.
	Proc []int `json:"proc,omitempty"`
	// Outcome is the attempt's outcome class (Outcomes).
	Outcome []string `json:"outcome"`
	Error   []string `json:"error,omitempty"`
	Errno   []string `json:"errno,omitempty"`
	// PhasesUS holds a column per phase (Phases): each client's time in
	// it, null where a client did not complete it.
	PhasesUS map[string][]*int64 `json:"phases_us,omitempty"`
	// ConnectUS and RTTsUS are each client's connect time and verified
	// round trips.
	ConnectUS []int64     `json:"connect_us,omitempty"`
	RTTsUS    [][]float64 `json:"rtts_us,omitempty"`
	// TLSResumed is true where the handshake resumed a session
	// (--tls-resume).
	TLSResumed []bool   `json:"tls_resumed,omitempty"`
	LocalQPN   []uint32 `json:"local_qpn,omitempty"`
	// Logical is the client's logical ID on its LocalQPN, shared with
	// other logical clients (mux mode).
	Logical   []uint32 `json:"logical,omitempty"`
	RemoteQPN []uint32 `json:"remote_qpn,omitempty"`
	LocalPSN  []uint32 `json:"local_psn,omitempty"`
	RemotePSN []uint32 `json:"remote_psn,omitempty"`
	// Command is what a client command did (--client-cmd), null for
	// the built-in clients.
	Command []*CommandRecord `json:"command,omitempty"`
}

// column is field f of every record, or nil when it is zero in all. It
// reads the records in place: a copy of each, given to f, would be a
// heap allocation per record and column.
func column[T comparable](rs Records, f func(*ClientRecord) T) []T {
	var zero T
	for i := range rs {
		if f(&rs[i]) == zero {
			continue
		}
		out := make([]T, len(rs))
		for j := range rs {
			out[j] = f(&rs[j])
		}
		return out
	}
	return nil
}

// Columns turns rs into its saved form.
func (rs Records) Columns() RecordColumns {
	c := RecordColumns{
		Proc:       column(rs, func(r *ClientRecord) int { return r.Proc }),
		Outcome:    make([]string, len(rs)),
		Error:      column(rs, func(r *ClientRecord) string { return r.Error }),
		Errno:      column(rs, func(r *ClientRecord) string { return r.Errno }),
		ConnectUS:  column(rs, func(r *ClientRecord) int64 { return r.ConnectUS }),
		TLSResumed: column(rs, func(r *ClientRecord) bool { return r.TLSResumed }),
		LocalQPN:   column(rs, func(r *ClientRecord) uint32 { return r.LocalQPN }),
		Logical:    column(rs, func(r *ClientRecord) uint32 { return r.Logical }),
		RemoteQPN:  column(rs, func(r *ClientRecord) uint32 { return r.RemoteQPN }),
		LocalPSN:   column(rs, func(r *ClientRecord) uint32 { return r.LocalPSN }),
		RemotePSN:  column(rs, func(r *ClientRecord) uint32 { return r.RemotePSN }),
		Command:    column(rs, func(r *ClientRecord) *CommandRecord { return r.Command }),
	}
	var vals map[string][]int64 // the phase columns' values, one allocation each
	for i, r := range rs {
		c.Outcome[i] = r.Outcome
		if r.ID != i && c.ID == nil {
			c.ID = make([]int, len(rs))
			for j := range rs {
				c.ID[j] = rs[j].ID
			}
		}
		if len(r.RTTsUS) > 0 && c.RTTsUS == nil {
			c.RTTsUS = make([][]float64, len(rs))
			for j := range rs {
				c.RTTsUS[j] = rs[j].RTTsUS
			}
		}
		for name, us := range r.PhasesUS {
			if c.PhasesUS == nil {
				c.PhasesUS, vals = map[string][]*int64{}, map[string][]int64{}
			}
			col := c.PhasesUS[name]
			if col == nil {
				col, vals[name] = make([]*int64, len(rs)), make([]int64, len(rs))
				c.PhasesUS[name] = col
			}
			vals[name][i] = us
			col[i] = &vals[name][i]
		}
	}
	return c
}

// Records turns saved columns back into records, refusing a column
// whose length is not the clients'.
func (c RecordColumns) Records() (Records, error) {
	n := len(c.Outcome)
	check := func(name string, l int) error {
		if l != 0 && l != n {
			return fmt.Errorf("records: column %s has %d values for %d clients", name, l, n)
		}
		return nil
	}
	for _, col := range []struct {
		name string
		n    int
	}{{"id", len(c.ID)}, {"proc", len(c.Proc)}, {"error", len(c.Error)}, {"errno", len(c.Errno)},
		{"connect_us", len(c.ConnectUS)}, {"rtts_us", len(c.RTTsUS)}, {"tls_resumed", len(c.TLSResumed)},
		{"local_qpn", len(c.LocalQPN)}, {"logical", len(c.Logical)}, {"remote_qpn", len(c.RemoteQPN)},
		{"local_psn", len(c.LocalPSN)}, {"remote_psn", len(c.RemotePSN)}, {"command", len(c.Command)}} {
		if err := check(col.name, col.n); err != nil {
			return nil, err
		}
	}
	for name, col := range c.PhasesUS {
		if len(col) != n {
			return nil, fmt.Errorf("records: column phases_us.%s has %d values for %d clients", name, len(col), n)
		}
	}
	rs := make(Records, n)
	for i := range rs {
		r := &rs[i]
		r.ID, r.Outcome = i, c.Outcome[i]
		if c.ID != nil {
			r.ID = c.ID[i]
		}
		if c.Proc != nil {
			r.Proc = c.Proc[i]
		}
		if c.Error != nil {
			r.Error = c.Error[i]
		}
		if c.Errno != nil {
			r.Errno = c.Errno[i]
		}
		if c.ConnectUS != nil {
			r.ConnectUS = c.ConnectUS[i]
		}
		if c.RTTsUS != nil {
			r.RTTsUS = c.RTTsUS[i]
		}
		if c.TLSResumed != nil {
			r.TLSResumed = c.TLSResumed[i]
		}
		if c.LocalQPN != nil {
			r.LocalQPN = c.LocalQPN[i]
		}
		if c.Logical != nil {
			r.Logical = c.Logical[i]
		}
		if c.RemoteQPN != nil {
			r.RemoteQPN = c.RemoteQPN[i]
		}
		if c.LocalPSN != nil {
			r.LocalPSN = c.LocalPSN[i]
		}
		if c.RemotePSN != nil {
			r.RemotePSN = c.RemotePSN[i]
		}
		if c.Command != nil {
			r.Command = c.Command[i]
		}
		for name, col := range c.PhasesUS {
			if col[i] == nil {
				continue
			}
			if r.PhasesUS == nil {
				r.PhasesUS = make(map[string]int64, len(c.PhasesUS))
			}
			r.PhasesUS[name] = *col[i]
		}
	}
	return rs, nil
}

// MarshalJSON saves rs as columns.
func (rs Records) MarshalJSON() ([]byte, error) {
	return json.Marshal(rs.Columns())
}

// UnmarshalJSON reads columns, or the array of objects of a run saved
// before schema version 15.
func (rs *Records) UnmarshalJSON(b []byte) error {
	switch t := bytes.TrimLeft(b, " \t\r\n"); {
	case len(t) > 0 && t[0] == '[':
		var old []ClientRecord
		if err := json.Unmarshal(t, &old); err != nil {
			return err
		}
		*rs = old
		return nil
	case bytes.Equal(t, []byte("null")):
		*rs = nil
		return nil
	}
	var c RecordColumns
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	r, err := c.Records()
	if err != nil {
		return err
	}
	*rs = r
	return nil
}
