package report

import (
	htmltemplate "html/template"
	"strings"
)

// The HTML draws the status marks as inline SVG: the emoji ✅ ⚠️ ❌ ↯ ⏸
// show as empty boxes where no colour-emoji font is installed, which is
// the default on the servers these reports are opened on. Markdown and
// the terminal keep the emoji, each followed by its word ("✅ pass"):
// their usual viewers (GitHub, editors and terminals on desktops) carry
// an emoji font, and where one does not the word still reads.
//
// Each mark differs in shape as well as colour, so it also reads in
// grey: a tick, a triangle, a cross, a zigzag, and the pause bars of a
// point cut short in a rounded square.
var marks = []struct{ emoji, kind, shape string }{
	{"✅", "pass", `<circle cx="8" cy="8" r="8" fill="#1a7f37"/><path d="M4.2 8.3l2.6 2.7 5-5.8" fill="none" stroke="#fff" stroke-width="2"/>`},
	{"⚠️", "warning", `<path d="M8 .5L15.8 15H.2z" fill="#bf8700"/><path d="M8 5.5v5M8 11.8v1.6" stroke="#fff" stroke-width="2"/>`},
	{"⚠", "warning", `<path d="M8 .5L15.8 15H.2z" fill="#bf8700"/><path d="M8 5.5v5M8 11.8v1.6" stroke="#fff" stroke-width="2"/>`},
	{"❌", "fail", `<circle cx="8" cy="8" r="8" fill="#cf222e"/><path d="M5 5l6 6M11 5l-6 6" stroke="#fff" stroke-width="2"/>`},
	{"↯", "non-monotonic", `<circle cx="8" cy="8" r="8" fill="#8250df"/><path d="M9.5 3L6 8h4l-3.5 5" fill="none" stroke="#fff" stroke-width="1.8"/>`},
	{"⏸", "interrupted", `<rect width="16" height="16" rx="3" fill="#57606a"/><path d="M5.8 4v8M10.2 4v8" stroke="#fff" stroke-width="2.2"/>`},
}

// markReplacer turns each mark's emoji into its inline SVG.
var markReplacer = func() *strings.Replacer {
	var pairs []string
	for _, m := range marks {
		pairs = append(pairs, m.emoji, `<svg data-mark="`+m.kind+`" role="img" aria-label="`+m.kind+
			`" viewBox="0 0 16 16" width="1em" height="1em" style="vertical-align:-.15em">`+m.shape+`</svg>`)
	}
	return strings.NewReplacer(pairs...)
}()

// markHTML escapes s and draws the status marks in it.
func markHTML(s string) htmltemplate.HTML {
	return htmltemplate.HTML(markReplacer.Replace(htmltemplate.HTMLEscapeString(s)))
}
