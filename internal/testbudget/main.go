// Command testbudget reads `go test -json` on stdin and prints what a
// plain `go test` would have said (a line per package, and the output of
// each failed test), then the slowest tests and each package's time,
// including the time its test binary spent outside its tests (TestMain,
// where a shared guest boots). It exits 1 when a test ran longer than
// the budget, 60 s, or than its own ceiling in long.txt.
//
//	go test -json ./... | go run ./internal/testbudget
package main

import (
	_ "embed"
	"fmt"
	"io"
	"os"
)

//go:embed long.txt
var longList string

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

func run(in io.Reader, out, errOut io.Writer) int {
	long, err := parseLong(longList)
	if err != nil {
		fmt.Fprintf(errOut, "testbudget: long.txt: %v\n", err)
		return 2
	}
	s := newSuite(out)
	if err := s.read(in); err != nil {
		fmt.Fprintf(errOut, "testbudget: %v\n", err)
		return 2
	}
	s.report(out, 15)
	if over := s.overBudget(long); len(over) > 0 {
		fmt.Fprintln(out)
		for _, o := range over {
			fmt.Fprintln(out, o)
		}
		return 1
	}
	return 0
}
