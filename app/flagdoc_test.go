package app

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/flags.md and the README from the code")

// The flag tables of docs/flags.md are the CLI's own flags: a flag
// added, renamed or given a new default fails this test until the
// reference says so (-update rewrites the tables).
func TestDocFlags(t *testing.T) {
	const path, begin, end = "../docs/flags.md", "<!-- flags:begin -->\n", "<!-- flags:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %q ... %q markers", path, strings.TrimSpace(begin), end)
	}
	want := FlagTables(New(Streams{In: bytes.NewReader(nil), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}))
	got := readme[i+len(begin) : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's flag tables differ from the flags; run go test ./app -run TestDocFlags -update\nwant:\n%s", path, want)
}

// Every visible flag of every visible command is in the tables.
func TestFlagTablesCoverEveryFlag(t *testing.T) {
	app := New(Streams{In: bytes.NewReader(nil), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	tables := FlagTables(app)
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		for _, f := range c.Flags {
			if hiddenFlag(f) {
				if n := "`--" + f.Names()[0]; strings.Contains(tables, n+"`") || strings.Contains(tables, n+" ") {
					t.Errorf("hidden flag --%s of %s is in the tables", f.Names()[0], c.Name)
				}
				continue
			}
			if !strings.Contains(tables, "`--"+f.Names()[0]+"`") && !strings.Contains(tables, "`--"+f.Names()[0]+" ") {
				t.Errorf("--%s of %s is missing from the tables", f.Names()[0], c.Name)
			}
		}
	}
}
