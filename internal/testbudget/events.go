package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// module is cut from package paths, so that tables read "app", not the
// whole import path.
const module = "github.com/rdmaprobe/rdmaprobe"

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

type test struct {
	pkg, name string
	start     time.Time
	elapsed   time.Duration
	// unfinished: the package ended (a timeout, a crash) before the test
	// did; its time runs to the package's end.
	unfinished bool
	done       bool
	output     []string
}

type pkg struct {
	name       string
	start, end time.Time
	elapsed    time.Duration
	done       bool
	output     []string // lines outside any test
	tests      map[string]*test
}

// suite is what has been read so far; out gets the plain go test lines
// as the events arrive.
type suite struct {
	out         io.Writer
	pkgs        map[string]*pkg
	order       []*pkg
	first, last time.Time
}

func newSuite(out io.Writer) *suite {
	return &suite{out: out, pkgs: map[string]*pkg{}}
}

func shortName(p string) string {
	if p == module {
		return "."
	}
	return strings.TrimPrefix(p, module+"/")
}

// read consumes the stream; lines that are not JSON (go's own messages
// before a package runs) pass through as they are.
func (s *suite) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(s.out, "%s\n", line)
			continue
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading go test -json: %w", err)
	}
	for _, p := range s.order {
		s.finish(p, s.last)
	}
	return nil
}

func (s *suite) add(e event) {
	if !e.Time.IsZero() {
		if s.first.IsZero() || e.Time.Before(s.first) {
			s.first = e.Time
		}
		if e.Time.After(s.last) {
			s.last = e.Time
		}
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
		return
	case "build-fail":
		return
	}
	p := s.pkgs[e.Package]
	if p == nil {
		p = &pkg{name: shortName(e.Package), start: e.Time, tests: map[string]*test{}}
		s.pkgs[e.Package] = p
		s.order = append(s.order, p)
	}
	if e.Test == "" {
		s.addPackage(p, e)
		return
	}
	// A subtest's time and output belong to its top-level test.
	top, _, sub := strings.Cut(e.Test, "/")
	t := p.tests[top]
	if t == nil {
		t = &test{pkg: p.name, name: top, start: e.Time}
		p.tests[top] = t
	}
	switch e.Action {
	case "output":
		t.output = append(t.output, e.Output)
	case "pass", "fail", "skip":
		if sub {
			return
		}
		t.done = true
		t.elapsed = seconds(e.Elapsed)
		if e.Action == "fail" {
			for _, l := range t.output {
				fmt.Fprint(s.out, l)
			}
		}
		t.output = nil
	}
}

func (s *suite) addPackage(p *pkg, e event) {
	switch e.Action {
	case "output":
		p.output = append(p.output, e.Output)
	case "pass", "skip":
		// Only go test's summary line: "ok  \tpkg\t1.2s" or "?   \tpkg\t[no test files]".
		for _, l := range p.output {
			if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "? ") {
				fmt.Fprint(s.out, l)
			}
		}
		p.elapsed = seconds(e.Elapsed)
		s.finish(p, e.Time)
	case "fail":
		for _, l := range p.output {
			fmt.Fprint(s.out, l)
		}
		p.elapsed = seconds(e.Elapsed)
		s.finish(p, e.Time)
	}
}

// finish closes p at end: a test still running then is charged up to it.
func (s *suite) finish(p *pkg, end time.Time) {
	if p.done {
		return
	}
	p.done, p.end, p.output = true, end, nil
	if p.elapsed == 0 && !p.start.IsZero() {
		p.elapsed = end.Sub(p.start)
	}
	for _, t := range p.tests {
		if !t.done {
			t.done, t.unfinished = true, true
			t.elapsed = end.Sub(t.start)
		}
	}
}

func seconds(f float64) time.Duration {
	return time.Duration(f * float64(time.Second))
}
