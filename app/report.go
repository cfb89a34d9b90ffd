package app

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
)

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "md,html", Usage: "report formats, comma-separated: md, html"}
}

func formats(c *cli.Context) ([]string, error) {
	var out []string
	for _, f := range strings.Split(c.String("format"), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if f != "md" && f != "html" {
			return nil, fail(2, "--format %q: want md, html or md,html", c.String("format"))
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fail(2, "--format is empty: want md, html or md,html")
	}
	return out, nil
}

func reportCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "render Markdown and HTML reports from a saved run.json or bench.json",
		ArgsUsage: "RUN.json|BENCH.json",
		Flags: []cli.Flag{
			formatFlag(),
			&cli.StringFlag{Name: "out", Usage: "directory for the report (default: the run's own directory)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(2, "report takes one RUN.json, flags first: rdmaprobe report [--format md,html] [--out DIR] RUN.json (got %d arguments)", c.NArg())
			}
			fs, err := formats(c)
			if err != nil {
				return err
			}
			path := c.Args().First()
			kind, err := result.ReadKind(path)
			if err != nil {
				return fail(1, "%v", err)
			}
			out := c.String("out")
			if out == "" {
				out = filepath.Dir(path)
			}
			if kind == bench.Kind {
				b, err := bench.Load(path)
				if err != nil {
					return fail(1, "%v", err)
				}
				files, err := report.WriteBench(b, out, fs)
				if err != nil {
					return fail(1, "write report in %s: %v", out, err)
				}
				sayReports(s, files, "report.", "report")
				return nil
			}
			run, err := result.Load(path)
			if err != nil {
				return fail(1, "%v", err)
			}
			return writeReport(s, run, out, fs)
		},
	}
}

// writeReport renders run into dir and says where the files are.
func writeReport(s Streams, run *result.Run, dir string, fs []string) error {
	files, err := report.WriteAll(run, dir, fs)
	if err != nil {
		return fail(1, "write report in %s: %v", dir, err)
	}
	sayReports(s, files, "report.", "report")
	return nil
}

// sayReports names the documents among files (not their plots).
func sayReports(s Streams, files []string, prefix, what string) {
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), prefix) {
			fmt.Fprintf(s.Out, "%s: %s\n", what, f)
		}
	}
}

func compareCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "set saved runs side by side (e.g. sim vs Soft-RoCE, per-client vs shared-cq), or saved bench runs",
		ArgsUsage: "A.json B.json [...]",
		Flags: []cli.Flag{
			formatFlag(),
			&cli.StringFlag{Name: "out", Value: ".", Usage: "directory for compare.md/compare.html"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 {
				return fail(2, "compare takes two or more run.json (or bench.json) files, flags first: rdmaprobe compare [--out DIR] A.json B.json ...")
			}
			for _, a := range c.Args().Slice() {
				if strings.HasPrefix(a, "-") {
					return fail(2, "compare: flag %s after the files: put flags first", a)
				}
			}
			fs, err := formats(c)
			if err != nil {
				return err
			}
			paths := c.Args().Slice()
			kinds := make([]string, len(paths))
			for i, p := range paths {
				if kinds[i], err = result.ReadKind(p); err != nil {
					return fail(1, "%v", err)
				}
			}
			for i := range paths {
				if kinds[i] != kinds[0] {
					return fail(2, "compare: %s is %s but %s is %s: compare runs with runs and bench files with bench files",
						paths[0], kindName(kinds[0]), paths[i], kindName(kinds[i]))
				}
			}
			out := c.String("out")
			var files []string
			if kinds[0] == bench.Kind {
				var runs []*bench.Run
				for _, p := range paths {
					r, err := bench.Load(p)
					if err != nil {
						return fail(1, "%v", err)
					}
					runs = append(runs, r)
				}
				files, err = report.WriteBenchComparison(runs, out, fs)
			} else {
				var runs []*result.Run
				for _, p := range paths {
					r, err := result.Load(p)
					if err != nil {
						return fail(1, "%v", err)
					}
					runs = append(runs, r)
				}
				files, err = report.WriteComparison(runs, out, fs)
			}
			if err != nil {
				return fail(1, "write comparison in %s: %v", out, err)
			}
			sayReports(s, files, "compare.", "comparison")
			return nil
		},
	}
}

// kindName says what a file of kind k holds, for messages.
func kindName(k string) string {
	switch k {
	case result.KindRun:
		return "a capacity run"
	case bench.Kind:
		return "a bench file"
	}
	return fmt.Sprintf("a file of kind %q", k)
}
