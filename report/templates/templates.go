// Package templates holds the report templates, embedded in the binary:
// report.md.tmpl (text/template) and report.html.tmpl (html/template),
// and the same pair for compare, for the overview of a run of several
// server designs (designs.*.tmpl), for a bench run (bench.*.tmpl) and for
// a comparison of bench runs (bench-compare.*.tmpl).
package templates

import "embed"

// FS holds every *.tmpl file of this directory.
//
//go:embed *.tmpl
var FS embed.FS
