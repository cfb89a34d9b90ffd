package result

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse, as a damaged or hostile
// run.json would: it must never panic, and its errors are one line so
// they read well in a report listing.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"tool":"rdmaprobe","mode":"search","points":[]}`))
	f.Add([]byte(`{"schema_version":99,"tool":"rdmaprobe"}`))
	f.Add([]byte(`{"schema_version":1,"tool":"rdmaprobe","points":[{"clients":"x"}]}`))
	f.Add([]byte(`{"schema_version":1,"tool":"rdmaprobe","points":[{"clie`))
	f.Add([]byte("\n\t "))
	f.Fuzz(func(t *testing.T, b []byte) {
		run, err := Parse(b)
		if err != nil {
			if run != nil {
				t.Fatalf("Parse returned a run alongside error %v", err)
			}
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			return
		}
		if run == nil {
			t.Fatal("Parse returned neither a run nor an error")
		}
	})
}
