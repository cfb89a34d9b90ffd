package app

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/internal/clihelp"
)

// Every visible flag of the commands with many is in a help group: a
// flag added without one (flagCategory) fails here.
func TestFlagCategories(t *testing.T) {
	app := New(Streams{In: bytes.NewReader(nil), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}})
	for _, name := range categorized {
		c := clihelp.CommandAt(app, name)
		if c == nil {
			t.Errorf("no command %s", name)
			continue
		}
		for _, f := range c.Flags {
			if hiddenFlag(f) {
				continue
			}
			cf, ok := f.(cli.CategorizableFlag)
			if !ok || cf.GetCategory() == "" {
				t.Errorf("%s --%s has no help group: add it to flagCategory", name, f.Names()[0])
			}
		}
	}
}

// --help shows the flags of search in named groups and no default that
// says nothing.
func TestHelpGroupsAndDefaults(t *testing.T) {
	groups := regexp.MustCompile(`(?m)^   ([A-Z][^\n]*)\n\n   --`)
	for _, c := range visibleCommands(New(Streams{}).Commands, "") {
		out, errOut, code := run(t, append(strings.Fields(c.Name), "--help")...)
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", c.Name, code, errOut)
		}
		for _, noise := range []string{"(default: 0)", "(default: false)", "(default: 0s)", `(default: "")`} {
			if strings.Contains(out, noise) {
				t.Errorf("%s --help prints %s", c.Name, noise)
			}
		}
		if c.Name == "search" {
			if g := groups.FindAllStringSubmatch(out, -1); len(g) < 4 {
				t.Errorf("search --help shows %d named groups of flags, want at least 4:\n%s", len(g), out)
			}
		}
	}
}

// Every --help fits 80 columns, names what each flag takes, and sends
// the reader to no Go identifier.
func TestHelpFitsAndNamesValues(t *testing.T) {
	goIdent := regexp.MustCompile(`\b[a-z]+\.[A-Z][A-Za-z]+\b`)
	for _, c := range append(visibleCommands(New(Streams{}).Commands, ""), &cli.Command{}) {
		out, errOut, code := run(t, append(strings.Fields(c.Name), "--help")...)
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", c.Name, code, errOut)
		}
		for _, l := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("%s --help: a line of %d columns: %q", c.Name, n, l)
			}
			if placeholderValue.MatchString(l) {
				t.Errorf("%s --help: the placeholder value: %q", c.Name, l)
			}
			if m := goIdent.FindString(l); m != "" {
				t.Errorf("%s --help: the Go identifier %s: %q", c.Name, m, l)
			}
		}
	}
}

var placeholderValue = regexp.MustCompile(`--\S+ value\b`)

// Every visible flag that takes a value has a placeholder that names it.
func TestHelpPlaceholders(t *testing.T) {
	for _, c := range visibleCommands(New(Streams{}).Commands, "") {
		for _, f := range c.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if ok && df.TakesValue() && !hiddenFlag(f) && valueName(f) == "" {
				t.Errorf("%s --%s takes a value with no name: add it to flagValue", c.Name, f.Names()[0])
			}
		}
	}
}

// search --help shows its groups in the order of the task, and the
// flags of one backend in a group of their own.
func TestHelpGroupOrder(t *testing.T) {
	out, _, _ := run(t, "search", "--help")
	out = out[strings.Index(out, "OPTIONS:"):]
	want := []string{catServer, catBackend, catCounts, catPass, catClients, catTraffic, catOutput, catHosts, catCommands, catSim, catVM}
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "   ") && !strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "   -") && strings.TrimSpace(l) != "" {
			got = append(got, strings.TrimSpace(l))
		}
	}
	if g := strings.Join(got, " | "); !strings.HasSuffix(g, strings.Join(want, " | ")) {
		t.Errorf("search --help groups:\n%s\nwant them to end in\n%s", g, strings.Join(want, " | "))
	}
	for _, l := range strings.Split(out, "\n") {
		for _, prefix := range []string{"   --sim-", "   --vm-"} {
			if strings.HasPrefix(l, prefix) {
				name := strings.Fields(l)[0]
				if i := strings.Index(out, name+" "); i < strings.Index(out, catSim) && i < strings.Index(out, catVM) {
					t.Errorf("%s is shown before the backend-specific groups", name)
				}
			}
		}
	}
}

// Each command's usage lines are examples that parse: every line of a
// UsageText that starts with "rdmaprobe" is run through the CLI with
// the actions replaced.
func TestUsageExamplesParse(t *testing.T) {
	n := 0
	for _, c := range visibleCommands(New(Streams{}).Commands, "") {
		if c.UsageText == "" {
			t.Errorf("%s has no usage example", c.Name)
		}
		for _, l := range strings.Split(c.UsageText, "\n") {
			if !strings.HasPrefix(l, "rdmaprobe ") {
				continue
			}
			argv, err := command.Split(l)
			if err != nil {
				t.Fatalf("%s: %q: %v", c.Name, l, err)
			}
			parseOnly(t, argv[1:])
			n++
		}
	}
	if n < 8 {
		t.Errorf("found %d usage examples, want at least one per command", n)
	}
}

// visibleCommands are the visible commands and their subcommands, each
// named by its path ("bench soak").
func visibleCommands(cmds []*cli.Command, prefix string) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		named := *c
		named.Name = strings.TrimSpace(prefix + " " + c.Name)
		out = append(append(out, &named), visibleCommands(c.Subcommands, named.Name)...)
	}
	return out
}

// Every old flag name still works: it sets the new flag, says what
// replaced it, and is hidden from help.
func TestOldFlagNames(t *testing.T) {
	app := New(Streams{})
	for _, r := range renamed {
		paths := []string{r.cmd}
		if r.cmd == "" {
			paths = nil
			for _, c := range visibleCommands(app.Commands, "") {
				if flagNamed(c.Flags, r.new) != nil && !ownRename(c.Name, r.old) {
					paths = append(paths, c.Name)
				}
			}
		}
		for _, path := range paths {
			c := clihelp.CommandAt(New(Streams{}), path)
			old, new := flagNamed(c.Flags, r.old), flagNamed(c.Flags, r.new)
			if old == nil || new == nil {
				t.Errorf("%s: --%s or --%s missing", path, r.old, r.new)
				continue
			}
			if !hiddenFlag(old) {
				t.Errorf("%s --%s is shown in help", path, r.old)
			}
			value := map[bool]string{true: "3s", false: "7"}[strings.Contains(fmt.Sprintf("%T", new), "Duration")]
			if _, ok := new.(*cli.StringFlag); ok {
				value = "somewhere"
			}
			var errOut bytes.Buffer
			a := New(Streams{In: bytes.NewReader(nil), Out: &bytes.Buffer{}, Err: &errOut})
			var got string
			sub := clihelp.CommandAt(a, path)
			sub.Action = func(c *cli.Context) error { got = fmt.Sprint(c.Value(r.new)); return nil }
			sub.Subcommands = nil
			args := append([]string{"rdmaprobe"}, strings.Fields(path)...)
			if err := a.Run(append(args, "--"+r.old, value)); err != nil {
				t.Errorf("%s --%s %s: %v", path, r.old, value, err)
				continue
			}
			if got != value {
				t.Errorf("%s --%s %s set --%s to %s", path, r.old, value, r.new, got)
			}
			if want := "--" + r.old + " is now --" + r.new; !strings.Contains(errOut.String(), want) {
				t.Errorf("%s --%s: stderr %q lacks %q", path, r.old, errOut.String(), want)
			}
		}
	}
}

func ownRename(path, old string) bool {
	for _, r := range renamed {
		if r.cmd == path && r.old == old {
			return true
		}
	}
	return false
}
