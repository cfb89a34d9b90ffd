package main

import (
	"bytes"
	"strings"
	"testing"
)

// A stream in go test -json's shape: app passes with a test over the
// budget, guestsuites' listed test within its ceiling, report fails one
// test, and server's binary dies inside a test (a timeout).
const stream = `go: downloading example.com/x v1.0.0
{"Time":"2026-12-05T10:00:00Z","Action":"start","Package":"github.com/rdmaprobe/rdmaprobe/app"}
{"Time":"2026-12-05T10:00:00Z","Action":"run","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestSlow"}
{"Time":"2026-12-05T10:00:00Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Time":"2026-12-05T10:00:00Z","Action":"run","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestSlow/sub"}
{"Time":"2026-12-05T10:01:00Z","Action":"pass","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestSlow/sub","Elapsed":61}
{"Time":"2026-12-05T10:01:01Z","Action":"pass","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestSlow","Elapsed":61.5}
{"Time":"2026-12-05T10:01:01Z","Action":"run","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestQuick"}
{"Time":"2026-12-05T10:01:02Z","Action":"pass","Package":"github.com/rdmaprobe/rdmaprobe/app","Test":"TestQuick","Elapsed":1}
{"Time":"2026-12-05T10:01:02Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/app","Output":"PASS\n"}
{"Time":"2026-12-05T10:01:02Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/app","Output":"ok  \tgithub.com/rdmaprobe/rdmaprobe/app\t90.000s\n"}
{"Time":"2026-12-05T10:01:30Z","Action":"pass","Package":"github.com/rdmaprobe/rdmaprobe/app","Elapsed":90}
{"Time":"2026-12-05T10:00:00Z","Action":"run","Package":"github.com/rdmaprobe/rdmaprobe/internal/guestsuites","Test":"TestGuestSuites"}
{"Time":"2026-12-05T10:02:00Z","Action":"pass","Package":"github.com/rdmaprobe/rdmaprobe/internal/guestsuites","Test":"TestGuestSuites","Elapsed":120}
{"Time":"2026-12-05T10:02:00Z","Action":"pass","Package":"github.com/rdmaprobe/rdmaprobe/internal/guestsuites","Elapsed":121}
{"Time":"2026-12-05T10:00:00Z","Action":"run","Package":"github.com/rdmaprobe/rdmaprobe/report","Test":"TestBroken"}
{"Time":"2026-12-05T10:00:00Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/report","Test":"TestBroken","Output":"    report_test.go:9: want 1, got 2\n"}
{"Time":"2026-12-05T10:00:00Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/report","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.20s)\n"}
{"Time":"2026-12-05T10:00:00Z","Action":"fail","Package":"github.com/rdmaprobe/rdmaprobe/report","Test":"TestBroken","Elapsed":0.2}
{"Time":"2026-12-05T10:00:01Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/report","Output":"FAIL\tgithub.com/rdmaprobe/rdmaprobe/report\t1.000s\n"}
{"Time":"2026-12-05T10:00:01Z","Action":"fail","Package":"github.com/rdmaprobe/rdmaprobe/report","Elapsed":1}
{"Time":"2026-12-05T10:00:00Z","Action":"run","Package":"github.com/rdmaprobe/rdmaprobe/server","Test":"TestHangs"}
{"Time":"2026-12-05T10:00:10Z","Action":"output","Package":"github.com/rdmaprobe/rdmaprobe/server","Output":"panic: test timed out after 10s\n"}
{"Time":"2026-12-05T10:00:10Z","Action":"fail","Package":"github.com/rdmaprobe/rdmaprobe/server","Elapsed":10}
{"Time":"2026-12-05T10:00:00Z","Action":"skip","Package":"github.com/rdmaprobe/rdmaprobe/certs","Elapsed":0}
`

func TestReport(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(strings.NewReader(stream), &out, &errOut)
	got := out.String()
	if code != 1 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q; want 1 (TestSlow is past the budget) and nothing on stderr", code, errOut.String())
	}
	for _, want := range []string{
		"go: downloading example.com/x v1.0.0\n",
		"ok  \tgithub.com/rdmaprobe/rdmaprobe/app\t90.000s\n",
		// A failed test's output and its package's lines; a passed one's not.
		"    report_test.go:9: want 1, got 2\n--- FAIL: TestBroken (0.20s)\n",
		"FAIL\tgithub.com/rdmaprobe/rdmaprobe/report\t1.000s\n",
		"panic: test timed out after 10s\n",
		// Slowest first; a subtest counts in its parent, not on its own line.
		"seconds  package               test\n" +
			"  120.0  internal/guestsuites  TestGuestSuites\n" +
			"   61.5  app                   TestSlow\n" +
			"   10.0  server                TestHangs (unfinished)\n" +
			"    1.0  app                   TestQuick\n" +
			"    0.2  report                TestBroken\n",
		// The package's whole time, its tests' and what is left (TestMain).
		"wall clock of the whole stream 120)",
		"   90.0      62.5           27.5  app\n",
		"app TestSlow ran 61.5s, past the 1m0s a test may take",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; it is:\n%s", want, got)
		}
	}
	for _, not := range []string{"=== RUN   TestSlow", "PASS\n", "TestSlow/sub", "guestsuites TestGuestSuites ran", "certs"} {
		if strings.Contains(got, not) {
			t.Errorf("output has %q; it is:\n%s", not, got)
		}
	}
}

func TestCeilings(t *testing.T) {
	long, err := parseLong(longList)
	if err != nil {
		t.Fatalf("long.txt: %v", err)
	}
	if _, ok := long["internal/guestsuites TestGuestSuites"]; !ok {
		t.Errorf("long.txt has no ceiling for TestGuestSuites: %v", long)
	}
	long, err = parseLong("internal/guestsuites TestGuestSuites 5m one boot for all\n")
	if err != nil {
		t.Fatal(err)
	}
	s := newSuite(&bytes.Buffer{})
	if err := s.read(strings.NewReader(strings.ReplaceAll(stream, `"Elapsed":120}`, `"Elapsed":400}`))); err != nil {
		t.Fatal(err)
	}
	over := strings.Join(s.overBudget(long), "\n")
	if !strings.Contains(over, "internal/guestsuites TestGuestSuites ran 400.0s, past its ceiling of 5m0s") {
		t.Errorf("a listed test past its ceiling is not named: %q", over)
	}
	for _, bad := range []string{"app TestX 30s too short\n", "app TestX 2m\n", "app TestX soon a reason\n"} {
		if _, err := parseLong(bad); err == nil {
			t.Errorf("parseLong(%q) took it", bad)
		}
	}
}
