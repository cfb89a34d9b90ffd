package clihelp

import (
	"testing"

	"github.com/urfave/cli/v2"
)

// Categorize files each flag under its group, a command's own entry
// first, and orders the flags as the groups list them; flags of no
// group (hidden ones: every visible flag has one) go first.
func TestCategorize(t *testing.T) {
	app := &cli.App{Commands: []*cli.Command{{Name: "run", Subcommands: []*cli.Command{{Name: "sub", Flags: []cli.Flag{
		&cli.StringFlag{Name: "other"}, &cli.IntFlag{Name: "n", Value: 3}, &cli.DurationFlag{Name: "wait"}, &cli.BoolFlag{Name: "x"},
	}}}}}}
	groups := []Group{{"First", []string{"run sub/wait"}}, {"Second", []string{"n", "wait"}}}
	Categorize(app, []string{"run sub"}, groups)
	c := CommandAt(app, "run sub")
	var got []string
	for _, f := range c.Flags {
		got = append(got, f.Names()[0]+":"+f.(cli.CategorizableFlag).GetCategory())
	}
	want := []string{"other:", "x:", "wait:First", "n:Second"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
			break
		}
	}
	if v, d := TypeValue(c.Flags[3]), DefaultText(c.Flags[3]); v != "N" || d != "3" {
		t.Errorf("--n: placeholder %q, default %q", v, d)
	}
	if d := DefaultText(c.Flags[2]); d != "" {
		t.Errorf("--wait's zero default shows as %q", d)
	}
}
