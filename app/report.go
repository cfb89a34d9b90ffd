package app

import (
	"fmt"
	"os"
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
			return nil, fail(ExitUsage, "--format %q: want md, html or md,html", c.String("format"))
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fail(ExitUsage, "--format is empty: want md, html or md,html")
	}
	return out, nil
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
			path, err := savedPath(c.Args().First())
			if err != nil {
				return fail(ExitRunError, "%v", err)
			}
			f, err := loadFile(path)
			if err != nil {
				return fail(ExitRunError, "%v", err)
			}
			out := c.String("report-dir")
			if out == "" {
				out = filepath.Dir(path)
			}
			if f.bench != nil {
				files, err := report.WriteBench(f.bench, out, fs)
				if err != nil {
					return fail(ExitRunError, "write report in %s: %v", out, err)
				}
				sayReports(s, files, "report.", "report")
				return nil
			}
			if err := measured(path, f.run); err != nil {
				return err
			}
			return writeReport(s, f.run, out, fs)
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
			loaded := make([]savedFile, len(paths))
			for i, p := range paths {
				if loaded[i], err = loadFile(p); err != nil {
					return fail(ExitRunError, "%v", err)
				}
			}
			for i := range paths {
				if err := measured(paths[i], loaded[i].run); err != nil {
					return err
				}
				if loaded[i].kind != loaded[0].kind {
					return fail(ExitUsage, "compare: %s is %s but %s is %s: compare runs with runs and bench files with bench files",
						paths[0], kindName(loaded[0].kind), paths[i], kindName(loaded[i].kind))
				}
			}
			out := c.String("report-dir")
			var files []string
			if loaded[0].bench != nil {
				var runs []*bench.Run
				for _, f := range loaded {
					runs = append(runs, f.bench)
				}
				files, err = report.WriteBenchComparison(runs, out, fs)
			} else {
				var runs []*result.Run
				var names []string
				for i, f := range loaded {
					runs = append(runs, f.run)
					names = append(names, runName(paths[i]))
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

// measured refuses, in one line, a run (nil: a bench file) that holds
// no point to report, not even one cut short: one that never started says why, one that stopped
// before its first point says what stopped it.
func measured(path string, run *result.Run) error {
	if run == nil || len(run.Points) > 0 || run.Interrupted != nil {
		return nil
	}
	switch {
	case strings.HasPrefix(run.Error, result.NotStarted):
		return fail(ExitRunError, "%s: the run never started: %s", path, strings.TrimPrefix(run.Error, result.NotStarted))
	case run.Error != "":
		return fail(ExitRunError, "%s: no point was measured: the run stopped (%s)", path, run.Error)
	}
	return fail(ExitRunError, "%s: no point was measured yet (the run may still be in progress)", path)
}

// savedFile is a saved run or bench file, read once.
type savedFile struct {
	kind  string
	run   *result.Run
	bench *bench.Run
}

// loadFile reads path, decompressed once, and parses it by its kind;
// every error is one line naming the file.
func loadFile(path string) (savedFile, error) {
	path, err := savedPath(path)
	if err != nil {
		return savedFile{}, err
	}
	kind, b, err := result.ReadKind(path)
	if err != nil {
		return savedFile{}, err
	}
	f := savedFile{kind: kind}
	if kind == bench.Kind {
		f.bench, err = bench.Parse(b)
	} else {
		f.run, err = result.Parse(b)
	}
	if err != nil {
		return savedFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// savedPath is the saved file of a run's directory (its run.json or
// bench.json, gzipped or not), or path itself when it is a file.
func savedPath(path string) (string, error) {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return path, nil
	}
	for _, name := range []string{result.FileName, result.FileName + ".gz", bench.FileName, bench.FileName + ".gz"} {
		p := filepath.Join(path, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: a directory without %s or %s", path, result.FileName, bench.FileName)
}

// runName names a run in a comparison by its directory.
func runName(path string) string {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return filepath.Base(filepath.Clean(path))
	}
	return filepath.Base(filepath.Dir(filepath.Clean(path)))
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
