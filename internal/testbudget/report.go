package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// budget is how long one test may run unless long.txt gives it a ceiling.
const budget = 60 * time.Second

func (s *suite) tests() []*test {
	var all []*test
	for _, p := range s.order {
		for _, t := range p.tests {
			all = append(all, t)
		}
	}
	slices.SortFunc(all, func(a, b *test) int {
		if a.elapsed != b.elapsed {
			return int(b.elapsed - a.elapsed)
		}
		return strings.Compare(a.pkg+" "+a.name, b.pkg+" "+b.name)
	})
	return all
}

// report prints the n slowest tests, then every package that ran tests:
// its binary's whole time, the time inside its top-level tests, and the
// rest, spent in TestMain and between tests (a sum over tests that ran in
// parallel can exceed the whole; the rest is then 0).
func (s *suite) report(out io.Writer, n int) {
	all := s.tests()
	fmt.Fprintf(out, "\nslowest %d tests\n", min(n, len(all)))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "seconds\tpackage\ttest")
	for _, t := range all[:min(n, len(all))] {
		name := t.name
		if t.unfinished {
			name += " (unfinished)"
		}
		fmt.Fprintf(w, "%7.1f\t%s\t%s\n", t.elapsed.Seconds(), t.pkg, name)
	}
	w.Flush()

	pkgs := slices.Clone(s.order)
	slices.SortStableFunc(pkgs, func(a, b *pkg) int { return int(b.elapsed - a.elapsed) })
	fmt.Fprintf(out, "\npackage times, seconds (wall clock of the whole stream %.0f)\n", s.last.Sub(s.first).Seconds())
	fmt.Fprintln(out, "  total  in tests  outside tests  package")
	for _, p := range pkgs {
		if len(p.tests) == 0 {
			continue
		}
		var in time.Duration
		for _, t := range p.tests {
			in += t.elapsed
		}
		fmt.Fprintf(out, "%7.1f  %8.1f  %13.1f  %s\n", p.elapsed.Seconds(), in.Seconds(), max(p.elapsed-in, 0).Seconds(), p.name)
	}
}

// overBudget names each test that ran past its ceiling.
func (s *suite) overBudget(long map[string]ceiling) []string {
	var over []string
	for _, t := range s.tests() {
		c, listed := long[t.pkg+" "+t.name]
		switch {
		case listed && t.elapsed > c.limit:
			over = append(over, fmt.Sprintf("%s %s ran %.1fs, past its ceiling of %v in internal/testbudget/long.txt (%s)",
				t.pkg, t.name, t.elapsed.Seconds(), c.limit, c.reason))
		case !listed && t.elapsed > budget:
			over = append(over, fmt.Sprintf("%s %s ran %.1fs, past the %v a test may take; make it shorter (share the package's guest, or run it on sim), or give it a ceiling and a reason in internal/testbudget/long.txt",
				t.pkg, t.name, t.elapsed.Seconds(), budget))
		}
	}
	return over
}

type ceiling struct {
	limit  time.Duration
	reason string
}

// parseLong reads long.txt: "package test ceiling reason", # comments.
func parseLong(text string) (map[string]ceiling, error) {
	long := map[string]ceiling{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 4)
		if len(f) < 4 || strings.TrimSpace(f[3]) == "" {
			return nil, fmt.Errorf("line %d: want package, test, ceiling and a reason", n)
		}
		d, err := time.ParseDuration(f[2])
		if err != nil || d <= budget {
			return nil, fmt.Errorf("line %d: ceiling %q is not a duration above %v", n, f[2], budget)
		}
		long[f[0]+" "+f[1]] = ceiling{d, strings.TrimSpace(f[3])}
	}
	return long, nil
}
