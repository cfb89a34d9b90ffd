package app

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// renamed are the flags' old names (docs/flags.md, "Names"): each still
// works, as a hidden flag copied into the new one at start-up with a
// note, since urfave/cli shows every alias in --help. An entry without
// a command holds in every command that has the new name and no entry
// of its own for the old one.
var renamed = []struct{ cmd, old, new string }{
	{"bench soak", "duration", "soak-duration"},
	{"bench soak", "out", "results"},
	{"bench rdmacm", "out", "results"},
	{"bench rdmacm", "n", "connections"},
	{"bench", "out", "results"},
	{"bench", "n", "ops"},
	{"report", "out", "report-dir"},
	{"compare", "out", "report-dir"},
	{"", "rate", "connect-rate"},
	{"", "duration", "traffic"},
	{"", "max-duration", "traffic-max"},
	{"", "port", "device-port"},
}

// keepOldNames gives every command its renamed flags' old names.
func keepOldNames(cmds []*cli.Command, prefix string, s Streams) {
	for _, c := range cmds {
		path := prefix + c.Name
		type pair struct{ old, new string }
		var pairs []pair
		own := map[string]bool{}
		for _, r := range renamed {
			if r.cmd == path {
				own[r.old] = true
			}
		}
		for _, r := range renamed {
			if (r.cmd == path || r.cmd == "" && !own[r.old]) && flagNamed(c.Flags, r.new) != nil && flagNamed(c.Flags, r.old) == nil {
				c.Flags = append(c.Flags, hiddenCopy(flagNamed(c.Flags, r.new), r.old))
				pairs = append(pairs, pair{r.old, r.new})
			}
		}
		if len(pairs) > 0 {
			before := c.Before
			c.Before = func(ctx *cli.Context) error {
				for _, p := range pairs {
					if !ctx.IsSet(p.old) {
						continue
					}
					if err := copyFlag(ctx, p.old, p.new); err != nil {
						return fail(ExitUsage, "%s: --%s: %v", path, p.old, err)
					}
					fmt.Fprintf(s.Err, "rdmaprobe: --%s is now --%s (the old name still works)\n", p.old, p.new)
				}
				if before != nil {
					return before(ctx)
				}
				return nil
			}
		}
		keepOldNames(c.Subcommands, path+" ", s)
	}
}

func flagNamed(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// copyFlag sets the flag called to from the one called from.
func copyFlag(ctx *cli.Context, from, to string) error {
	if v := ctx.StringSlice(from); len(v) > 0 {
		for _, s := range v {
			if err := ctx.Set(to, s); err != nil {
				return err
			}
		}
		return nil
	}
	return ctx.Set(to, fmt.Sprint(ctx.Value(from)))
}

// hiddenCopy is f under another name, hidden from help.
func hiddenCopy(f cli.Flag, name string) cli.Flag {
	switch f := f.(type) {
	case *cli.StringFlag:
		g := *f
		g.Name, g.Aliases, g.Hidden, g.Category = name, nil, true, ""
		return &g
	case *cli.IntFlag:
		g := *f
		g.Name, g.Aliases, g.Hidden, g.Category = name, nil, true, ""
		return &g
	case *cli.Float64Flag:
		g := *f
		g.Name, g.Aliases, g.Hidden, g.Category = name, nil, true, ""
		return &g
	case *cli.DurationFlag:
		g := *f
		g.Name, g.Aliases, g.Hidden, g.Category = name, nil, true, ""
		return &g
	case *cli.BoolFlag:
		g := *f
		g.Name, g.Aliases, g.Hidden, g.Category = name, nil, true, ""
		return &g
	}
	panic(fmt.Sprintf("renamed flag --%s: no copy for %T", name, f))
}
