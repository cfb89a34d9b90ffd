package app

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// flagsFirst moves a command's flags ahead of its arguments, so that
// `report RUN.json --report-dir DIR` reads as `report --report-dir DIR RUN.json`, as
// go, git and kubectl accept: urfave/cli v2 parses with Go's flag
// package, which stops at the first argument and would take the rest
// for files. A flag's value moves with it (a flag that takes one takes
// the next word, even one starting with "-", as Go's flag package
// does); "--" still ends the flags, and what follows it stays an
// argument. A flag the command does not know moves too, so that it is
// refused as an unknown flag rather than read as a file name. args
// start with the program's name, as os.Args.
func flagsFirst(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "--" {
			return args
		}
		i++ // the App's own flags (--help, --version) take no value
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	// A subcommand (bench soak) right after its command owns the flags.
	for i+1 < len(args) {
		sub := cmd.Command(args[i+1])
		if sub == nil {
			break
		}
		cmd, i = sub, i+1
	}
	var flags, rest []string
	dashes := false
	words := args[i+1:]
	for j := 0; j < len(words); j++ {
		w := words[j]
		if w == "--" {
			rest, dashes = append(rest, words[j+1:]...), true
			break
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			rest = append(rest, w)
			continue
		}
		flags = append(flags, w)
		name := strings.TrimLeft(w, "-")
		if !strings.Contains(name, "=") && takesValue(cmd, name) && j+1 < len(words) {
			j++
			flags = append(flags, words[j])
		}
	}
	out := append(append([]string{}, args[:i+1]...), flags...)
	if dashes {
		out = append(out, "--")
	}
	return append(out, rest...)
}

// takesValue reports whether cmd has a flag called name that takes a
// value (not a bool).
func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				v, ok := f.(cli.DocGenerationFlag)
				return ok && v.TakesValue()
			}
		}
	}
	return false
}
