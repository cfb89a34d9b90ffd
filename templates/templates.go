// Package templates holds the report templates, embedded in the binary:
// report.md.tmpl (text/template) and report.html.tmpl (html/template),
// and the same pair for compare.
package templates

import "embed"

// FS holds every *.tmpl file of this directory.
//
//go:embed *.tmpl
var FS embed.FS
