package app

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/internal/eventually"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// docFiles are the Markdown files whose examples TestDocExamples runs:
// the README and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages under ../docs: %v", err)
	}
	return append([]string{"../README.md"}, pages...)
}

// docCommands are the rdmaprobe command lines of the ```sh blocks of
// the README and docs/, in order, as argv without the program's name:
// continuation lines joined, comments dropped, words split as a shell
// would.
func docCommands(t *testing.T) [][]string {
	t.Helper()
	var cmds [][]string
	for _, f := range docFiles(t) {
		cmds = append(cmds, shCommands(t, f)...)
	}
	return cmds
}

// shCommands are the rdmaprobe command lines of one file's ```sh
// blocks.
func shCommands(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return shCommandsIn(t, path, b)
}

// shCommandsIn are the rdmaprobe command lines of the ```sh blocks of
// b, read from path.
func shCommandsIn(t *testing.T, path string, b []byte) [][]string {
	t.Helper()
	var cmds [][]string
	in, line := false, ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
			continue
		case strings.HasPrefix(l, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if strings.HasSuffix(l, `\`) {
			line += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		line += l
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			line = ""
			continue
		}
		words, err := command.Split(line)
		line = ""
		if err != nil {
			t.Fatalf("%s: %q: %v", path, l, err)
		}
		for i, w := range words {
			if strings.HasPrefix(w, "#") {
				words = words[:i]
				break
			}
		}
		if len(words) > 1 && words[0] == "rdmaprobe" {
			cmds = append(cmds, words[1:])
		}
	}
	return cmds
}

// docSamples are the sample outputs of the README and docs/: a plain
// ``` block right after a ```sh block (blank lines between), keyed by
// the sh block's last command as docCommands gives it, joined by
// spaces.
func docSamples(t *testing.T) map[string][]string {
	t.Helper()
	samples := map[string][]string{}
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "```sh") {
				continue
			}
			end := i + 1
			for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
				end++
			}
			j := end + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j >= len(lines) || lines[j] != "```" {
				continue
			}
			var sample []string
			for k := j + 1; k < len(lines) && !strings.HasPrefix(lines[k], "```"); k++ {
				sample = append(sample, lines[k])
			}
			if cmds := shCommandsIn(t, f, []byte(strings.Join(lines[i:end+1], "\n"))); len(cmds) > 0 {
				samples[strings.Join(cmds[len(cmds)-1], " ")] = sample
			}
		}
	}
	return samples
}

// vmOnly are the sample lines a sim run cannot print: the guest's and
// the references it reads (its own tests hold them).
var vmOnly = []string{"backend: vm", "guest:", "reference "}

var (
	number  = regexp.MustCompile(`[0-9][0-9.,]*`)
	runPath = regexp.MustCompile(`\S*results/\S*/(run\.json|report\.)\S*`)
	// A traffic window that ran past its minimum says so; the sample's
	// ran its minimum, a capped example's may run past it.
	extended = regexp.MustCompile(` \(extended from [0-9.]+ s\)`)
	spaces   = regexp.MustCompile(`\s+`)
	// A latency's unit follows its size: 912us, 11.9ms.
	unit = regexp.MustCompile(`N(us|µs|ms|s)\b`)
)

// shape is a line with what differs between runs masked: numbers (and
// a latency's unit), the run's path, a traffic window's extension, the
// sim's labels, the spaces that align columns.
func shape(l string) string {
	l = strings.ReplaceAll(strings.ReplaceAll(l, " [simulated]", ""), "(simulated) ", "")
	l = runPath.ReplaceAllString(l, "RUN")
	l = extended.ReplaceAllString(l, "")
	l = unit.ReplaceAllString(number.ReplaceAllString(l, "N"), "N")
	return strings.TrimSpace(spaces.ReplaceAllString(l, " "))
}

// checkSample holds a documented sample output to what the command
// printed: each sample line but "..." (lines left out) and vmOnly
// lines has the shape of a printed line; one that ends in " ..." (the
// rest left out) starts one.
func checkSample(t *testing.T, sample []string, out string) {
	t.Helper()
	var printed []string
	for _, l := range strings.Split(out, "\n") {
		printed = append(printed, shape(l))
	}
	for _, l := range sample {
		if s := strings.TrimSpace(l); s == "" || s == "..." || slices.ContainsFunc(vmOnly, func(p string) bool { return strings.HasPrefix(s, p) }) {
			continue
		}
		want, cut := shape(l), false
		if strings.HasSuffix(want, " ...") {
			want, cut = strings.TrimSuffix(want, " ..."), true
		}
		if !slices.ContainsFunc(printed, func(p string) bool { return p == want || cut && strings.HasPrefix(p, want) }) {
			t.Errorf("the sample line\n%s\nis not a line the command prints now; it printed:\n%s", l, out)
		}
	}
}

// exampleFlag is one flag of an example, with its value if it takes
// one.
type exampleFlag struct {
	name, value string
	hasValue    bool
}

// example is an example command taken apart, to be made cheap.
type example struct {
	cmd   string
	flags []exampleFlag
	args  []string
}

func parseExample(app *cli.App, argv []string) example {
	e := example{cmd: argv[0]}
	c := app.Command(e.cmd)
	words := argv[1:]
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			e.args = append(e.args, w)
			continue
		}
		name := strings.TrimLeft(w, "-")
		if k, v, ok := strings.Cut(name, "="); ok {
			e.flags = append(e.flags, exampleFlag{k, v, true})
			continue
		}
		f := exampleFlag{name: name}
		if c != nil && takesValue(c, name) && i+1 < len(words) {
			i++
			f.value, f.hasValue = words[i], true
		}
		e.flags = append(e.flags, f)
	}
	return e
}

func (e *example) get(name string) (string, bool) {
	for _, f := range e.flags {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}

func (e *example) set(name, value string) {
	for i, f := range e.flags {
		if f.name == name {
			e.flags[i].value, e.flags[i].hasValue = value, true
			return
		}
	}
	e.flags = append(e.flags, exampleFlag{name, value, true})
}

func (e *example) argv() []string {
	out := []string{e.cmd}
	for _, f := range e.flags {
		out = append(out, "--"+f.name)
		if f.hasValue {
			out = append(out, f.value)
		}
	}
	return append(out, e.args...)
}

// shrink divides a client count by 10, rounding up: the example's
// proportions (--lo, --hi and the cap between them) stay. A range
// (LO..HI:STEP) has each of its three divided.
func shrink(s string) string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if span, step, ok := strings.Cut(f, ":"); ok {
			lo, hi, _ := strings.Cut(span, "..")
			out = append(out, shrink(lo)+".."+shrink(hi)+":"+shrink(step))
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return s
		}
		out = append(out, strconv.Itoa((n+9)/10))
	}
	return strings.Join(out, ",")
}

// trafficCap bounds an example's traffic phase: its window still
// stretches until every client has completed a message (--traffic-max),
// so each client is measured, in an eightieth of the default phase.
const trafficCap = 25 * time.Millisecond

// sloWindow is a search by traffic's phase instead: in 25 ms one
// client's p99 is the phase's first messages (2.95 ms against the
// README's p99<=2ms, where 100 ms read 0.16 ms), and --lo fails.
const sloWindow = 100 * time.Millisecond

// slowDelay is the simulated service delay a search by traffic gets
// from --lo + 1 clients on: a round trip then takes at least
// 2·N·slowDelay (fabric/sim's delay line), 4 ms at 2 clients, past the
// README's p99<=2ms.
const slowDelay = time.Millisecond

// needsMore are the flags of examples that need more than this host's
// sim backend: the Soft-RoCE guest with the commands they name
// (target_vm_test.go runs them) or other hosts (runner's launcher
// tests). Those examples are parsed by the CLI, not run.
var needsMore = []string{"server-cmd", "server-build", "client-cmd", "hosts", "hostfile", "ssh", "launcher", "server-host"}

// Every rdmaprobe command of the ```sh blocks of the README and docs/
// is run, so that a documented command that stops working fails here.
// Each is made cheap the same way, and only so:
//
//   - search and ramp run on --backend sim (whatever the example's
//     backend), with every client count divided by 10 (--lo, --hi,
//     --max-n, --clients, --max-clients, --sim-max-qp, and the count of
//     --require), 1 round trip of 64 bytes, a traffic phase of at most
//     trafficCap (sloWindow for a search by traffic), no calibration or
//     sampling, and --results in a temporary directory. An unbounded search (no --hi) gets a simulated max_qp of
//     3 x --lo so that its doubling meets a wall, as the README says it
//     does; a documented --sim-max-qp inside [--lo, --hi] must come out
//     as the capacity, as the README says. A search by traffic
//     (--criterion traffic) gets a simulated service delay from --lo + 1
//     clients on (slowDelay), so that its SLO fails where it is planted,
//     not where this host's load happens to push the sim's latency:
//     its first failure must be there or below.
//   - serve runs on sim with its shrunk --max-clients, listening on a
//     free port, its files in a temporary directory, and is stopped
//     (as Ctrl-C does) once ready.
//   - report and compare read the runs the examples above saved, and
//     write into a temporary directory.
//   - an example with a flag of needsMore is parsed by the CLI (flags,
//     their values, arguments) without running.
//
// A search or ramp followed by a sample of its output calibrates for
// 50 ms, and each line of the sample must have the shape of a line it
// printed (checkSample).
func TestDocExamples(t *testing.T) {
	cmds := docCommands(t)
	if len(cmds) < 8 {
		t.Fatalf("found %d rdmaprobe commands in the sh blocks of the README and docs/, want at least 8: %q", len(cmds), cmds)
	}
	samples := docSamples(t)
	if len(samples) < 2 {
		t.Errorf("found %d sample outputs after the sh blocks, want the README's search and ramp", len(samples))
	}
	tmp := t.TempDir()
	results := filepath.Join(tmp, "results")
	var runs []string // run.json files saved so far, in order
	newRuns := func() []string {
		all, _ := filepath.Glob(filepath.Join(results, "*", result.FileName+"*"))
		var fresh []string
		for _, p := range all {
			seen := false
			for _, r := range runs {
				seen = seen || r == p
			}
			if !seen {
				fresh = append(fresh, p)
			}
		}
		runs = append(runs, fresh...)
		return fresh
	}
	app := New(Streams{})
	for i, argv := range cmds {
		e := parseExample(app, argv)
		name := strconv.Itoa(i+1) + "-" + e.cmd
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			defer func() { t.Logf("rdmaprobe %s: %.1f s", strings.Join(argv, " "), time.Since(start).Seconds()) }()
			for _, f := range needsMore {
				if _, ok := e.get(f); ok {
					parseOnly(t, argv)
					return
				}
			}
			switch e.cmd {
			case "search", "ramp":
				for _, f := range []string{"lo", "hi", "max-n", "clients", "max-clients", "sim-max-qp"} {
					if v, ok := e.get(f); ok {
						e.set(f, shrink(v))
					}
				}
				if v, ok := e.get("require"); ok {
					n, criterion, _ := strings.Cut(v, ":")
					if criterion != "" {
						criterion = ":" + criterion
					}
					e.set("require", shrink(n)+criterion)
				}
				sample, hasSample := samples[strings.Join(argv, " ")]
				criterion, _ := e.get("criterion")
				window := trafficCap
				if criterion == "traffic" {
					window = sloWindow
				}
				if v, ok := e.get("traffic"); !ok || v != "0" {
					if d, err := time.ParseDuration(v); !ok || err != nil || d > window {
						e.set("traffic", window.String())
					}
				}
				lo, _ := e.get("lo")
				_, bounded := e.get("hi")
				capQP, hasCap := e.get("sim-max-qp")
				if e.cmd == "search" && !bounded && !hasCap {
					n, _ := strconv.Atoi(lo)
					capQP, hasCap = strconv.Itoa(3*n), true
					e.set("sim-max-qp", capQP)
				}
				_, hasDelay := e.get("sim-service-delay")
				slowFrom := 0
				if e.cmd == "search" && criterion == "traffic" && !hasDelay {
					n, _ := strconv.Atoi(lo)
					slowFrom = n + 1
					e.set("sim-service-delay", slowDelay.String())
					e.set("sim-service-delay-from", strconv.Itoa(slowFrom))
				}
				// A fixed metrics port could be taken; lingering only waits.
				if _, ok := e.get("metrics-addr"); ok {
					e.set("metrics-addr", "127.0.0.1:0")
				}
				if _, ok := e.get("metrics-linger"); ok {
					e.set("metrics-linger", "0s")
				}
				// And it calibrates, briefly, as the sample's host speed
				// says it did.
				calibrate := "0"
				if hasSample {
					calibrate = "50ms"
				}
				for _, kv := range [][2]string{{"backend", "sim"}, {"rounds", "1"}, {"msg-size", "64"},
					{"calibrate", calibrate}, {"sample-interval", "0"}, {"results", results}} {
					e.set(kv[0], kv[1])
				}
				out, errOut, code := run(t, e.argv()...)
				if code != ExitMeasured {
					t.Fatalf("%q: exit %d\n%s\n%s", e.argv(), code, out, errOut)
				}
				if hasSample {
					checkSample(t, sample, out)
				}
				saved := newRuns()
				if len(saved) != 1 {
					t.Fatalf("%q saved %v", e.argv(), saved)
				}
				r, err := result.Load(saved[0])
				if err != nil {
					t.Fatal(err)
				}
				if e.cmd == "search" && hasCap {
					want, _ := strconv.Atoi(capQP)
					if r.Search == nil || r.Search.Capacity != want || r.Search.FirstFail == 0 {
						t.Errorf("%q: search %+v, want the simulated max_qp %d as the capacity", e.argv(), r.Search, want)
					}
				}
				if slowFrom > 0 && (r.Search == nil || r.Search.Capacity >= slowFrom || r.Search.FirstFail == 0 || r.Search.FirstFail > slowFrom) {
					t.Errorf("%q: search %+v, want the first failure at or below %d, where the simulated service delay starts", e.argv(), r.Search, slowFrom)
				}
			case "serve":
				serveExample(t, e, tmp)
			case "report", "compare":
				k := 0
				for j, a := range e.args {
					if strings.HasSuffix(a, "run.json") {
						if k >= len(runs) {
							t.Fatalf("%q: no run saved by the examples above to read", argv)
						}
						e.args[j] = runs[k]
						k++
					}
				}
				out := filepath.Join(tmp, name)
				e.set("out", out)
				if stdout, errOut, code := run(t, e.argv()...); code != ExitMeasured {
					t.Fatalf("%q: exit %d\n%s\n%s", e.argv(), code, stdout, errOut)
				}
				if files, _ := filepath.Glob(filepath.Join(out, "*.html")); len(files) != 1 {
					t.Errorf("%q wrote %v", e.argv(), files)
				}
			default:
				parseOnly(t, argv)
			}
		})
	}
}

// serveExample runs a serve example until it is ready, then stops it as
// Ctrl-C would; the files it was asked to write must be there.
func serveExample(t *testing.T, e example, tmp string) {
	t.Helper()
	var outs []string
	for i, f := range e.flags {
		if strings.HasSuffix(f.name, "-out") {
			e.flags[i].value = filepath.Join(tmp, filepath.Base(f.value))
			outs = append(outs, e.flags[i].value)
		}
	}
	if v, ok := e.get("max-clients"); ok {
		e.set("max-clients", shrink(v))
	}
	ready := filepath.Join(tmp, "serve-addr")
	e.set("backend", "sim")
	e.set("listen", "127.0.0.1:0")
	e.set("ready-file", ready)
	cmd := runAsync(t, e.argv()...)
	if !eventually.Within(30*time.Second, func() bool { b, _ := os.ReadFile(ready); return len(b) > 0 }) {
		cmd.interrupt()
		r := <-cmd.done
		t.Fatalf("%q never ready:\n%s\n%s", e.argv(), r.out, r.errOut)
	}
	cmd.interrupt()
	if r := <-cmd.done; r.code != ExitMeasured {
		t.Fatalf("%q: exit %d\n%s", e.argv(), r.code, r.errOut)
	}
	for _, f := range outs {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%q: %v", e.argv(), err)
		}
	}
}

// parseOnly runs argv through the CLI with every command's action
// replaced: flag names, their values and the arguments are checked as
// for a real run, and nothing runs.
func parseOnly(t *testing.T, argv []string) {
	t.Helper()
	var errOut bytes.Buffer
	app := New(Streams{In: bytes.NewReader(nil), Out: &bytes.Buffer{}, Err: &errOut})
	ran := false
	var stub func([]*cli.Command)
	stub = func(cmds []*cli.Command) {
		for _, c := range cmds {
			c.Action = func(*cli.Context) error { ran = true; return nil }
			stub(c.Subcommands)
		}
	}
	stub(app.Commands)
	args := append([]string{"rdmaprobe"}, argv...)
	if err := app.Run(flagsFirst(app, args)); err != nil || !ran {
		t.Errorf("%q does not parse: %v %s", argv, err, errOut.String())
	}
}
