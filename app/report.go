package app

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

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
		Usage:     "render Markdown and HTML reports from a saved run.json",
		ArgsUsage: "RUN.json",
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
			run, err := result.Load(path)
			if err != nil {
				return fail(1, "%v", err)
			}
			out := c.String("out")
			if out == "" {
				out = filepath.Dir(path)
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
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "report.") {
			fmt.Fprintf(s.Out, "report: %s\n", f)
		}
	}
	return nil
}

func compareCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "set saved runs side by side (e.g. sim vs Soft-RoCE, per-client vs shared-cq)",
		ArgsUsage: "A.json B.json [...]",
		Flags: []cli.Flag{
			formatFlag(),
			&cli.StringFlag{Name: "out", Value: ".", Usage: "directory for compare.md/compare.html"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 {
				return fail(2, "compare takes two or more run.json files, flags first: rdmaprobe compare [--out DIR] A.json B.json ...")
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
			var runs []*result.Run
			for _, p := range c.Args().Slice() {
				r, err := result.Load(p)
				if err != nil {
					return fail(1, "%v", err)
				}
				runs = append(runs, r)
			}
			files, err := report.WriteComparison(runs, c.String("out"), fs)
			if err != nil {
				return fail(1, "write comparison in %s: %v", c.String("out"), err)
			}
			for _, f := range files {
				if strings.HasPrefix(filepath.Base(f), "compare.") {
					fmt.Fprintf(s.Out, "comparison: %s\n", f)
				}
			}
			return nil
		},
	}
}
