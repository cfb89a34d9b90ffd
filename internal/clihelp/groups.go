package clihelp

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// Group is a help group: its name, and its flags in the order help
// shows them, each "flag", or "command path/flag" where a command uses a
// flag for something else (a subcommand's path is "cmd sub").
type Group struct {
	Name  string
	Flags []string
}

// Names are the groups' names, in order (Printer.Groups).
func Names(groups []Group) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Name)
	}
	return out
}

// CommandAt finds a command or, for "cmd sub", a subcommand.
func CommandAt(app *cli.App, path string) *cli.Command {
	name, sub, _ := strings.Cut(path, " ")
	c := app.Command(name)
	if c == nil || sub == "" {
		return c
	}
	return c.Command(sub)
}

// GroupOf is the group of the flag called name in command path, and
// its rank over all groups' flags (-1 when it has none).
func GroupOf(groups []Group, path, name string) (string, int) {
	for _, key := range []string{path + "/" + name, name} {
		rank := 0
		for _, g := range groups {
			for _, n := range g.Flags {
				if n == key {
					return g.Name, rank
				}
				rank++
			}
		}
	}
	return "", -1
}

// Categorize puts the flags of the commands at paths into their groups
// and orders them as groups list them, so that help (and docs generated
// from the flags) show them in that order.
func Categorize(app *cli.App, paths []string, groups []Group) {
	for _, path := range paths {
		c := CommandAt(app, path)
		if c == nil {
			continue
		}
		rank := map[cli.Flag]int{}
		for _, f := range c.Flags {
			cat, r := GroupOf(groups, path, f.Names()[0])
			setCategory(f, cat)
			rank[f] = r
		}
		slices.SortStableFunc(c.Flags, func(a, b cli.Flag) int { return rank[a] - rank[b] })
	}
}

// setCategory sets a flag's help group; urfave/cli v2 has the field on
// each flag type but no setter in its Flag interface.
func setCategory(f cli.Flag, cat string) {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Category = cat
	case *cli.IntFlag:
		f.Category = cat
	case *cli.Uint64Flag:
		f.Category = cat
	case *cli.Float64Flag:
		f.Category = cat
	case *cli.BoolFlag:
		f.Category = cat
	case *cli.DurationFlag:
		f.Category = cat
	case *cli.StringSliceFlag:
		f.Category = cat
	}
}

// TypeValue is the placeholder a flag's type implies: N (whole
// numbers), X (numbers), DURATION, or "" (a text flag, or one that takes
// no value).
func TypeValue(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "N"
	case *cli.Float64Flag:
		return "X"
	}
	return ""
}

// DefaultText is a flag's default as help shows it, blank for its
// type's zero value: "(default: 0)" says nothing, and a flag's usage
// says what 0 or off means where it means something.
func DefaultText(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	v := df.GetDefaultText()
	if v == "" {
		v = df.GetValue()
	}
	v = strings.Trim(v, `"`)
	if v == "0" || v == "0s" || v == "false" || v == "[]" {
		return ""
	}
	return v
}
