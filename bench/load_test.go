package bench

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

func sampleRun() *Run {
	r := &Run{SchemaVersion: SchemaVersion, Tool: Tool, Kind: Kind, ToolVersion: "test",
		StartedAt: time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC),
		Backend:   result.Backend{Name: "sim", Simulated: true},
		Config:    Config{N: 10, Concurrency: 4},
		Measurements: []Measurement{
			{Name: TLSHandshakeName, Concurrency: 1, Attempted: 10, OK: 10, PerSec: 1000, CostMS: 1},
			{Name: RawVerbsName, Concurrency: 1, Attempted: 10, OK: 10, PerSec: 5000, CostMS: 0.2},
			{Name: FullConnectName, Concurrency: 1, Attempted: 10, OK: 10, PerSec: 700, CostMS: 1.43},
		},
		Complete: true}
	r.Summarise()
	return r
}

func encode(t *testing.T, r *Run) []byte {
	t.Helper()
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	b := encode(t, sampleRun())
	for name, data := range map[string][]byte{"bench.json": b, "bench.json.gz": gz(b)} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, data, 0o644)
		got, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, sampleRun()) {
			t.Errorf("%s: round trip differs:\n got %+v\nwant %+v", name, got, sampleRun())
		}
	}
}

func TestLoadErrors(t *testing.T) {
	good := encode(t, sampleRun())
	newer := sampleRun()
	newer.SchemaVersion = SchemaVersion + 1
	run, _ := json.Marshal(&result.Run{SchemaVersion: result.SchemaVersion, Tool: "rdmaprobe", Mode: "search"})
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"truncated", good[:len(good)/2], "truncated JSON"},
		{"corrupt", []byte(`{"schema_version": 1, "tool": "rdmaprobe", "kind": "bench", x}`), "corrupt JSON at byte"},
		{"foreign", []byte(`{"name": "something else"}`), "not an rdmaprobe run"},
		{"run file", run, `a capacity run (kind "run"), not a bench run`},
		{"other kind", []byte(`{"schema_version": 1, "tool": "rdmaprobe", "kind": "trace"}`), `(kind "trace"), not a bench run`},
		{"newer", encode(t, newer), fmt.Sprintf("schema version %d is newer than this build reads (%d)", SchemaVersion+1, SchemaVersion)},
		{"wrong type", []byte(`{"schema_version": 1, "tool": "rdmaprobe", "kind": "bench", "measurements": "many"}`), `field "measurements"`},
		{"truncated gzip", gz(good)[:30], "gzip: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), FileName)
			os.WriteFile(p, tc.in, 0o644)
			got, err := Load(p)
			if err == nil || got != nil {
				t.Fatal("loaded bad input")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line naming the file and saying %q", err, tc.want)
			}
		})
	}
}
