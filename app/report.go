package app

import (
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
	"github.com/rdmaprobe/rdmaprobe/report"
	"github.com/rdmaprobe/rdmaprobe/result"
)

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "md,html", Usage: "report formats, comma-separated: md, html"}
}

func formats(c *cli.Context) ([]string, error) {
	fs, err := report.ParseFormats(c.String("format"))
	if err != nil {
		return nil, fail(ExitUsage, "%v", err)
	}
	return fs, nil
}

func reportCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "render Markdown and HTML reports from a saved run.json or bench.json",
		ArgsUsage: "RUN_DIR|RUN.json|BENCH.json",
		UsageText: "rdmaprobe report results/20261123T183650Z-vm --report-dir /tmp/r\n" +
			"rdmaprobe report results/20261123T183720Z-bench-vm/bench.json --format md",
		Flags: []cli.Flag{
			formatFlag(),
			&cli.StringFlag{Name: "report-dir", Usage: "directory for the report (default: the run's own directory)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(ExitUsage, "report takes one run: rdmaprobe report RUN_DIR|RUN.json [--format md,html] [--report-dir DIR] (got %d arguments)", c.NArg())
			}
			fs, err := formats(c)
			if err != nil {
				return err
			}
			path, err := report.SavedPath(c.Args().First())
			if err != nil {
				return fail(ExitRunError, "%v", err)
			}
			f, err := report.Load(path)
			if err != nil {
				return fail(ExitRunError, "%v", err)
			}
			out := c.String("report-dir")
			if out == "" {
				out = filepath.Dir(path)
			}
			if f.Bench != nil {
				files, err := report.WriteBench(f.Bench, out, fs)
				if err != nil {
					return fail(ExitRunError, "write report in %s: %v", out, err)
				}
				sayReports(s, files, "report.", "report")
				return nil
			}
			if err := f.Measured(path); err != nil {
				return fail(ExitRunError, "%v", err)
			}
			return writeReport(s, f.Run, out, fs)
		},
	}
}

// writeReport renders run into dir and says where the files are.
func writeReport(s Streams, run *result.Run, dir string, fs []string) error {
	files, err := report.WriteAll(run, dir, fs)
	if err != nil {
		return fail(ExitRunError, "write report in %s: %v", dir, err)
	}
	sayReports(s, files, "report.", "report")
	return nil
}

// sayReports names the documents among files (not their plots).
func sayReports(s Streams, files []string, prefix, what string) {
	width := screen.Width(s.Out)
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), prefix) {
			screen.Println(s.Out, width, what+": "+f)
		}
	}
}

func compareCommand(s Streams) *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "set saved runs side by side (e.g. sim vs Soft-RoCE, per-client vs shared-cq), or saved bench runs",
		ArgsUsage: "A.json B.json [...]",
		UsageText: "rdmaprobe compare results/20261123T183118Z-vm/run.json.gz results/20261123T203609Z-vm/run.json.gz --report-dir /tmp/c",
		Flags: []cli.Flag{
			formatFlag(),
			&cli.StringFlag{Name: "report-dir", Value: ".", Usage: "directory for compare.md/compare.html"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 {
				return fail(ExitUsage, "compare takes two or more run.json (or bench.json) files: rdmaprobe compare A.json B.json ... [--report-dir DIR]")
			}
			fs, err := formats(c)
			if err != nil {
				return err
			}
			paths := c.Args().Slice()
			loaded := make([]report.Saved, len(paths))
			for i, p := range paths {
				if loaded[i], err = report.Load(p); err != nil {
					return fail(ExitRunError, "%v", err)
				}
			}
			for i, f := range loaded {
				if err := f.Measured(paths[i]); err != nil {
					return fail(ExitRunError, "%v", err)
				}
				if f.Kind != loaded[0].Kind {
					return fail(ExitUsage, "compare: %s is %s but %s is %s: compare runs with runs and bench files with bench files",
						paths[0], report.KindName(loaded[0].Kind), paths[i], report.KindName(f.Kind))
				}
			}
			out := c.String("report-dir")
			var files []string
			if loaded[0].Bench != nil {
				var runs []*bench.Run
				for _, f := range loaded {
					runs = append(runs, f.Bench)
				}
				files, err = report.WriteBenchComparison(runs, out, fs)
			} else {
				var runs []*result.Run
				var names []string
				for i, f := range loaded {
					runs = append(runs, f.Run)
					names = append(names, report.RunName(paths[i]))
				}
				files, err = report.WriteComparison(runs, names, out, fs)
			}
			if err != nil {
				return fail(ExitRunError, "write comparison in %s: %v", out, err)
			}
			sayReports(s, files, "compare.", "comparison")
			return nil
		},
	}
}
