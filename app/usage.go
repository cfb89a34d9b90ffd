package app

import (
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"
)

// onUsageErrors makes every command answer a flag it cannot parse with
// one line and exit status 2, instead of urfave's "Incorrect Usage"
// followed by the whole help text.
//
// It also refuses what urfave would otherwise pass over in silence: an
// unknown command, and arguments to a command that takes none (`ramp 100
// --backend sim` is `ramp --backend sim 100` once flagsFirst has moved
// the flags, and 100 means nothing to ramp).
func onUsageErrors(app *cli.App) {
	app.OnUsageError = usageError("", app.Flags)
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return fail(ExitUsage, "unknown command %q (rdmaprobe --help lists the commands)", c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	for _, c := range app.Commands {
		guardCommand(c, c.Name)
		for _, sub := range c.Subcommands {
			guardCommand(sub, c.Name+" "+sub.Name)
		}
	}
}

// guardCommand gives cmd (called name) the one-line usage errors, and
// refuses arguments unless it takes some or they name a subcommand.
func guardCommand(cmd *cli.Command, name string) {
	cmd.OnUsageError = usageError(name, cmd.Flags)
	if cmd.ArgsUsage == "" && cmd.Before == nil {
		cmd.Before = func(c *cli.Context) error {
			if c.Args().Present() && cmd.Command(c.Args().First()) == nil {
				return fail(ExitUsage, "%s: unexpected argument %q: %s takes flags only (rdmaprobe %s --help lists them)",
					name, c.Args().First(), name, name)
			}
			return nil
		}
	}
}

var (
	invalidValue  = regexp.MustCompile(`^invalid value "(.*)" for flag -(\S+): `)
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)`)
)

// usageError's message starts with the command's name (Main prefixes
// "rdmaprobe: "), e.g. `ramp: --timeout: "5" is not a duration ...`.
func usageError(name string, flags []cli.Flag) cli.OnUsageErrorFunc {
	head, help := "", "rdmaprobe --help"
	if name != "" {
		head, help = name+": ", "rdmaprobe "+name+" --help"
	}
	return func(_ *cli.Context, err error, _ bool) error {
		msg := err.Error()
		if m := invalidValue.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("--%s: %q is not %s", m[2], m[1], flagKind(flags, m[2]))
		} else if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
			msg = "unknown flag --" + m[1]
		}
		return fail(ExitUsage, "%s%s (%s lists the flags)", head, msg, help)
	}
}

// flagKind says what the named flag takes, for an error message.
func flagKind(flags []cli.Flag, name string) string {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			switch f.(type) {
			case *cli.DurationFlag:
				return "a duration such as 30s, 250ms or 1m"
			case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
				return "a whole number"
			case *cli.Float64Flag:
				return "a number"
			case *cli.BoolFlag:
				return "true or false"
			}
		}
	}
	return "a valid value"
}
