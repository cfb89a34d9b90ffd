package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Flags go before or after a command's files, as go, git and kubectl
// take them; "--" still ends the flags.
func TestFlagsFirst(t *testing.T) {
	app := New(Streams{})
	for _, tc := range []struct{ in, want []string }{
		{[]string{"p", "report", "a.json", "--report-dir", "d"}, []string{"p", "report", "--report-dir", "d", "a.json"}},
		{[]string{"p", "report", "--report-dir", "d", "a.json"}, []string{"p", "report", "--report-dir", "d", "a.json"}},
		{[]string{"p", "report", "a.json", "--report-dir=d", "--format", "md"}, []string{"p", "report", "--report-dir=d", "--format", "md", "a.json"}},
		{[]string{"p", "compare", "a", "--report-dir", "d", "b", "c"}, []string{"p", "compare", "--report-dir", "d", "a", "b", "c"}},
		// A value that starts with "-" is still the flag's value.
		{[]string{"p", "ramp", "x", "--gid-index", "-1"}, []string{"p", "ramp", "--gid-index", "-1", "x"}},
		// A bool flag takes no value: the next word stays an argument.
		{[]string{"p", "ramp", "--detach", "x"}, []string{"p", "ramp", "--detach", "x"}},
		// An unknown flag moves too, so that it is refused as a flag.
		{[]string{"p", "report", "a.json", "--bogus", "x"}, []string{"p", "report", "--bogus", "a.json", "x"}},
		{[]string{"p", "report", "--report-dir", "d", "--", "-odd.json"}, []string{"p", "report", "--report-dir", "d", "--", "-odd.json"}},
		{[]string{"p", "report", "a.json", "--", "--report-dir"}, []string{"p", "report", "--", "a.json", "--report-dir"}},
		{[]string{"p", "--help"}, []string{"p", "--help"}},
		{[]string{"p", "frobnicate", "x", "--y"}, []string{"p", "frobnicate", "x", "--y"}},
	} {
		if got := flagsFirst(app, tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// report and compare take their flags before or after the files, run as
// whole commands; an unknown flag after a file is one line and exit 2.
func TestFlagsAfterFiles(t *testing.T) {
	run1 := "../report/testdata/published.json"
	dir := t.TempDir()
	run2 := filepath.Join(dir, "b.json")
	b, err := os.ReadFile(run1)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(run2, b, 0o644)
	for _, tc := range []struct {
		name string
		args func(out string) []string
		file string
	}{
		{"report flags first", func(o string) []string { return []string{"report", "--format", "md", "--report-dir", o, run1} }, "report.md"},
		{"report flags after", func(o string) []string { return []string{"report", run1, "--report-dir", o, "--format", "md"} }, "report.md"},
		{"report flags around", func(o string) []string { return []string{"report", "--format=md", run1, "--report-dir", o} }, "report.md"},
		{"report after --", func(o string) []string { return []string{"report", "--format", "md", "--report-dir", o, "--", run1} }, "report.md"},
		{"compare flags first", func(o string) []string { return []string{"compare", "--format", "md", "--report-dir", o, run1, run2} }, "compare.md"},
		{"compare flags after", func(o string) []string { return []string{"compare", run1, run2, "--report-dir", o, "--format", "md"} }, "compare.md"},
		{"compare flags between", func(o string) []string { return []string{"compare", run1, "--report-dir", o, run2, "--format", "md"} }, "compare.md"},
	} {
		out := t.TempDir()
		stdout, stderr, code := run(t, tc.args(out)...)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s%s", tc.name, code, stdout, stderr)
			continue
		}
		if _, err := os.Stat(filepath.Join(out, tc.file)); err != nil {
			t.Errorf("%s: --report-dir not honoured: %v", tc.name, err)
		}
		if _, err := os.Stat(filepath.Join(out, strings.TrimSuffix(tc.file, ".md")+".html")); err == nil {
			t.Errorf("%s: --format md not honoured: HTML written", tc.name)
		}
	}
	for _, args := range [][]string{
		{"report", run1, "--bogus"},
		{"report", run1, "--report-dir", t.TempDir(), "--bogus", "x"},
		{"compare", run1, run2, "--nope"},
	} {
		stdout, stderr, code := run(t, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "unknown flag --") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and one line naming the unknown flag", args, code, stdout, stderr)
		}
	}
}
