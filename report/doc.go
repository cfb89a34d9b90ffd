// Package report renders saved runs: the terminal summary, and Markdown
// and HTML reports with tables and plots.
//
// Every report is made the same way, from saved results alone: a model
// is computed from the run (NewModel, NewBenchModel, NewComparison,
// NewBenchComparison), its Document renders it through the templates of
// package templates, and Write puts the files in a directory: stem.md
// with the plots as PNG files beside it, stem.html with them inline as
// SVG. run.go, bench.go, compare.go and benchcompare.go hold one kind of
// report each; figures.go says what each plots and plots.go how a plot
// is drawn.
package report
