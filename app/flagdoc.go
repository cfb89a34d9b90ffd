package app

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/internal/clihelp"
)

// FlagTables renders the visible commands' flags as Markdown tables for
// docs/flags.md, from the flags themselves. A flag that several commands
// share with the same meaning and default is listed once, in a table
// headed by the commands that take it.
func FlagTables(app *cli.App) string {
	type row struct{ name, value, def, usage string }
	type group struct {
		cmds []string
		rows []row
	}
	var order []string // row keys in first-seen order
	rows := map[string]row{}
	cmdsOf := map[string][]string{}
	for _, c := range app.Commands {
		if c.Hidden {
			continue
		}
		for _, f := range c.Flags {
			df, ok := f.(cli.DocGenerationFlag)
			if !ok || hiddenFlag(f) {
				continue
			}
			r := row{name: f.Names()[0], usage: strings.ReplaceAll(df.GetUsage(), "`", ""), def: clihelp.DefaultText(f), value: valueName(f)}
			key := r.name + "\x00" + r.usage + "\x00" + r.def
			if _, seen := rows[key]; !seen {
				order = append(order, key)
				rows[key] = r
			}
			cmdsOf[key] = append(cmdsOf[key], c.Name)
		}
	}
	var groups []*group
	byCmds := map[string]*group{}
	for _, key := range order {
		k := strings.Join(cmdsOf[key], ", ")
		g := byCmds[k]
		if g == nil {
			g = &group{cmds: cmdsOf[key]}
			byCmds[k] = g
			groups = append(groups, g)
		}
		g.rows = append(g.rows, rows[key])
	}
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "| %s | default | meaning |\n|---|---|---|\n", "`"+strings.Join(g.cmds, "`, `")+"`")
		for _, r := range g.rows {
			name := "`--" + r.name
			if r.value != "" {
				name += " " + r.value
			}
			name += "`"
			fmt.Fprintf(&b, "| %s | %s | %s |\n", name, cell(r.def), cell(r.usage))
		}
	}
	return b.String()
}

func hiddenFlag(f cli.Flag) bool {
	v, ok := f.(cli.VisibleFlag)
	return ok && !v.IsVisible()
}

// cell escapes a table cell's text for Markdown.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "`", "", "<", "&lt;", ">", "&gt;").Replace(s)
}
