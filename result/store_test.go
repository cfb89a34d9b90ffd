package result

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sample() *Run {
	return &Run{
		SchemaVersion: SchemaVersion, Tool: "rdmaprobe", Mode: "search",
		Command:   []string{"rdmaprobe", "search", "--lo", "300"},
		StartedAt: time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC),
		Backend:   Backend{Name: "sim", Simulated: true, Reason: "requested"},
		Points: []Point{{Clients: 300, Attempted: 300, Connected: 300, SuccessRate: 1,
			Outcomes: map[string]int{OutcomeOK: 300},
			Records:  []ClientRecord{{ID: 0, Outcome: OutcomeOK, PhasesUS: map[string]int64{PhaseTLS: 512}, RTTsUS: []float64{12.5}}}}},
		PSN: PSNCheck{Connections: 300, Unique: true},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	want := sample()
	if err := Save(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, want)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only run.json", len(ents))
	}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// The largest saved runs are kept gzip-compressed; Load reads them as is.
func TestLoadGzip(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName)
	if err := Save(p, sample()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p+".gz", gz(b), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("gzip round trip differs: %+v", got)
	}
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	if err := Save(p, sample()); err != nil {
		t.Fatal(err)
	}
	// A failing save (directory made read-only... as root that is not
	// enforced, so use an unencodable value) leaves the old file intact.
	bad := sample()
	bad.Points[0].SuccessRate = nanValue()
	if err := Save(p, bad); err == nil {
		t.Fatal("saved an unencodable run")
	}
	if _, err := Load(p); err != nil {
		t.Errorf("previous run no longer loads: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("failed save left %d entries", len(ents))
	}
}

func nanValue() float64 {
	z := 0.0
	return z / z
}

func TestLoadErrors(t *testing.T) {
	good, _ := os.ReadFile(func() string {
		p := filepath.Join(t.TempDir(), "r.json")
		Save(p, sample())
		return p
	}())
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty file"},
		{"truncated", string(good[:len(good)/2]), "truncated JSON"},
		{"corrupt", `{"schema_version": 1, "tool": "rdmaprobe", x}`, "corrupt JSON at byte"},
		{"foreign", `{"name": "something else"}`, "not an rdmaprobe run"},
		{"array", `[1,2,3]`, "wrong type"},
		{"newer", `{"schema_version": 99, "tool": "rdmaprobe"}`, "schema version 99 is newer"},
		{"wrong type", `{"schema_version": 1, "tool": "rdmaprobe", "points": "many"}`, `field "points"`},
		{"truncated gzip", string(gz(good)[:30]), "gzip: unexpected EOF"},
		{"gzip of foreign", string(gz([]byte(`{"name": "x"}`))), "not an rdmaprobe run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "run.json")
			os.WriteFile(p, []byte(tc.in), 0o644)
			_, err := Load(p)
			if err == nil {
				t.Fatal("loaded bad input")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q should name the file and say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestNewRunDir(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 11, 22, 13, 4, 5, 0, time.UTC)
	a, err := NewRunDir(root, "sim", at)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRunDir(root, "sim", at)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(a) != "20261122T130405Z-sim" || filepath.Base(b) != "20261122T130405Z-sim-2" {
		t.Errorf("dirs %s, %s", a, b)
	}
}

// A bench.json is an rdmaprobe file too, but not a capacity run: Load
// refuses it naming its kind instead of rendering it as an empty run.
func TestParseRefusesOtherKinds(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"schema_version": 1, "tool": "rdmaprobe", "kind": "bench", "measurements": []}`, `a bench file (kind "bench"), not a capacity run`},
		{`{"schema_version": 1, "tool": "rdmaprobe", "kind": "trace"}`, `kind "trace", not a capacity run`},
		{"{\"schema_version\": 1, \"tool\": \"rdmaprobe\", \"kind\": \"x\\ny\"}", `kind "x\ny"`},
	} {
		run, err := Parse([]byte(tc.in))
		if err == nil || run != nil {
			t.Errorf("%s: parsed as a run", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("%s: error %q, want one line with %q", tc.in, err, tc.want)
		}
	}
	if _, err := Parse([]byte(`{"schema_version": 1, "tool": "rdmaprobe", "kind": "run"}`)); err != nil {
		t.Errorf("a run that says kind \"run\": %v", err)
	}
}

func TestReadKind(t *testing.T) {
	dir := t.TempDir()
	runPath := filepath.Join(dir, FileName)
	if err := Save(runPath, sample()); err != nil {
		t.Fatal(err)
	}
	benchPath := filepath.Join(dir, "bench.json.gz")
	os.WriteFile(benchPath, gz([]byte(`{"schema_version": 1, "tool": "rdmaprobe", "kind": "bench"}`)), 0o644)
	for path, want := range map[string]string{runPath: KindRun, benchPath: "bench"} {
		if got, _, err := ReadKind(path); err != nil || got != want {
			t.Errorf("%s: kind %q, %v; want %q", filepath.Base(path), got, err, want)
		}
	}
	good, _ := os.ReadFile(runPath)
	for name, tc := range map[string]struct{ in, want string }{
		"empty":     {"", "empty file"},
		"truncated": {string(good[:len(good)/2]), "truncated JSON"},
		"foreign":   {`{"name": "something else"}`, "not an rdmaprobe run"},
		"gzip":      {string(gz(good)[:30]), "gzip: unexpected EOF"},
	} {
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, []byte(tc.in), 0o644)
		_, _, err := ReadKind(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming the file and %q", name, err, tc.want)
		}
	}
}

// large returns a run whose JSON is larger than GzipAbove, as a run of a
// few thousand clients is.
func large() *Run {
	run := sample()
	recs := make([]ClientRecord, 50000)
	for i := range recs {
		recs[i] = ClientRecord{ID: i, Outcome: OutcomeOK, LocalPSN: uint32(i * 7919 % (1 << 24)),
			PhasesUS: map[string]int64{PhaseTLS: int64(500 + i%97)}, RTTsUS: []float64{12.5, float64(i % 31)}}
	}
	run.Points[0].Records = recs
	return run
}

// A run above GzipAbove is saved as run.json.gz, which loads back as the
// same run; a small one stays plain run.json. A run that grows past the
// size between saves leaves only the .gz behind.
func TestSaveRunGzipsLargeRuns(t *testing.T) {
	dir := t.TempDir()
	small := sample()
	p, err := SaveRun(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, FileName) {
		t.Errorf("small run saved as %s, want %s", p, FileName)
	}
	if b, _ := os.ReadFile(p); len(b) == 0 || b[0] != '{' {
		t.Errorf("small run is not plain JSON: %.20q", b)
	}

	want := large()
	p, err = SaveRun(dir, want)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, FileName+".gz") {
		t.Fatalf("large run saved as %s, want %s.gz", p, FileName)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := json.MarshalIndent(want, "", " ")
	if len(plain) <= GzipAbove || len(b) >= len(plain)/4 {
		t.Errorf("%d bytes of JSON (threshold %d) saved as %d bytes", len(plain), GzipAbove, len(b))
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the gzipped run loads back differently")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != FileName+".gz" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %s.gz", names, FileName)
	}

	// The same run saves to the same bytes (no time or name in the gzip
	// header), so re-saving a committed run does not churn the repository.
	if _, err := SaveRun(dir, want); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(p); !bytes.Equal(again, b) {
		t.Error("saving the same run twice wrote different bytes")
	}
}

// The runs committed under results/ (plain and gzipped) stay loadable
// by this build: the README's figures cite them.
func TestCommittedRunsLoad(t *testing.T) {
	runs, _ := filepath.Glob(filepath.Join("..", "results", "*", FileName+"*"))
	if len(runs) == 0 {
		t.Fatal("no runs under ../results")
	}
	for _, p := range runs {
		if r, err := Load(p); err != nil || len(r.Points) == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
}
