// Package clihelp prints urfave/cli help in a fixed width: the flag
// groups in the order given (urfave sorts them by name) and flags in
// the order the command lists them, each with a placeholder that names
// its value, every line wrapped at word boundaries (urfave never wraps
// a flag's help). Categorize files each command's flags into those
// groups.
package clihelp

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/internal/screen"
)

// Printer prints help; its Print is a cli.HelpPrinter.
type Printer struct {
	Width  int                   // columns of every line
	Groups []string              // flag groups in the order shown; others follow in first-seen order
	Value  func(cli.Flag) string // a flag's placeholder ("" for a flag that takes none)
	// Default is a flag's default as shown, "" for none.
	Default func(cli.Flag) string
}

const indent = "   "

// Print writes the help of data, a *cli.App or *cli.Command; urfave's
// template is not used.
func (p Printer) Print(w io.Writer, _ string, data any) {
	var b strings.Builder
	switch d := data.(type) {
	case *cli.App:
		p.section(&b, "NAME", p.title(d.Name, d.Usage))
		usage := d.UsageText
		if usage == "" {
			usage = d.Name + " [global options] command [command options]"
		}
		p.section(&b, "USAGE", p.usage(usage))
		if d.Version != "" && !d.HideVersion {
			p.section(&b, "VERSION", indent+d.Version)
		}
		if d.Description != "" {
			p.section(&b, "DESCRIPTION", p.text(d.Description))
		}
		p.section(&b, "COMMANDS", p.commands(d.VisibleCommands()))
		p.section(&b, "GLOBAL OPTIONS", p.flags(d.VisibleFlags()))
	case *cli.Command:
		name := d.HelpName
		if name == "" {
			name = d.Name
		}
		p.section(&b, "NAME", p.title(name, d.Usage))
		usage := d.UsageText
		if usage == "" {
			usage = name + " [options]"
			if d.ArgsUsage != "" {
				usage += " " + d.ArgsUsage
			}
		}
		p.section(&b, "USAGE", p.usage(usage))
		if d.Description != "" {
			p.section(&b, "DESCRIPTION", p.text(d.Description))
		}
		p.section(&b, "COMMANDS", p.commands(d.VisibleCommands()))
		p.section(&b, "OPTIONS", p.flags(d.VisibleFlags()))
	default:
		fmt.Fprintf(&b, "%v\n", data)
	}
	_, _ = io.WriteString(w, strings.TrimRight(b.String(), "\n")+"\n")
}

func (p Printer) section(b *strings.Builder, head, body string) {
	if strings.TrimSpace(body) == "" {
		return
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	b.WriteString(head + ":\n" + body + "\n")
}

func (p Printer) title(name, usage string) string {
	if usage == "" {
		return indent + name
	}
	return strings.Join(screen.Wrap(usage, p.Width, indent+name+" - ", indent+"  "), "\n")
}

// text wraps preformatted text, each line on its own, indented.
func (p Printer) text(s string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "" {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, indent+l)
	}
	return screen.WrapLines(strings.Join(lines, "\n"), p.Width)
}

// usage wraps each command line as a shell reads it (a continued line
// ends in a backslash) and the text between them as paragraphs.
func (p Printer) usage(s string) string {
	var lines, text []string
	flush := func() {
		if len(text) > 0 {
			lines = append(lines, p.text(strings.Join(text, "\n")))
			text = nil
		}
	}
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "rdmaprobe ") {
			text = append(text, l)
			continue
		}
		flush()
		w := screen.Wrap(l, p.Width-2, indent, indent+"    ")
		lines = append(lines, strings.Join(w, " \\\n"))
	}
	flush()
	return strings.Join(lines, "\n")
}

func (p Printer) commands(all []*cli.Command) string {
	var cmds []*cli.Command
	for _, c := range all {
		if c.Name != "help" { // --help says the same
			cmds = append(cmds, c)
		}
	}
	col := 0
	for _, c := range cmds {
		col = max(col, len(c.Name))
	}
	var lines []string
	for _, c := range cmds {
		head := indent + c.Name + strings.Repeat(" ", col-len(c.Name)+2)
		lines = append(lines, screen.Wrap(c.Usage, p.Width, head, strings.Repeat(" ", len(head)))...)
	}
	return strings.Join(lines, "\n")
}

// nameColumn is where a flag's help starts; a longer flag's help starts
// on the next line.
const nameColumn = 28

func (p Printer) flags(flags []cli.Flag) string {
	var groups []string
	byGroup := map[string][]cli.Flag{}
	for _, f := range flags {
		g := ""
		if cf, ok := f.(cli.CategorizableFlag); ok {
			g = cf.GetCategory()
		}
		if _, seen := byGroup[g]; !seen {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], f)
	}
	var ordered []string
	for _, g := range p.Groups {
		if _, ok := byGroup[g]; ok {
			ordered = append(ordered, g)
		}
	}
	for _, g := range groups {
		if !contains(p.Groups, g) {
			ordered = append(ordered, g)
		}
	}
	var b strings.Builder
	for i, g := range ordered {
		if i > 0 {
			b.WriteString("\n")
		}
		if g != "" {
			b.WriteString(indent + g + "\n\n")
		}
		for _, f := range byGroup[g] {
			b.WriteString(p.flag(f) + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// flag is one flag's lines: "--name VALUE, -n VALUE  help (default: x)".
func (p Printer) flag(f cli.Flag) string {
	value := ""
	if p.Value != nil {
		value = p.Value(f)
	}
	var names []string
	for _, n := range f.Names() {
		dash := "--"
		if utf8.RuneCountInString(n) == 1 {
			dash = "-"
		}
		s := dash + n
		if value != "" && len(names) == 0 {
			s += " " + value
		}
		names = append(names, s)
	}
	head := indent + strings.Join(names, ", ")
	usage := ""
	if df, ok := f.(cli.DocGenerationFlag); ok {
		usage = strings.ReplaceAll(df.GetUsage(), "`", "")
	}
	if p.Default != nil {
		if d := p.Default(f); d != "" {
			usage += " (default: " + d + ")"
		}
	}
	pad := strings.Repeat(" ", nameColumn)
	if utf8.RuneCountInString(head)+2 > nameColumn {
		return head + "\n" + strings.Join(screen.Wrap(usage, p.Width, pad, pad), "\n")
	}
	head += strings.Repeat(" ", nameColumn-utf8.RuneCountInString(head))
	return strings.Join(screen.Wrap(usage, p.Width, head, pad), "\n")
}
