package app

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/internal/testhosts"
	"github.com/rdmaprobe/rdmaprobe/runner/verbsbin"
	"github.com/rdmaprobe/rdmaprobe/runner/vm"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// The runner starts this test binary as the server and load generators;
// with this variable set it behaves as the rdmaprobe command.
const asCLI = "RDMAPROBE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		os.Exit(Main(os.Args, Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Setenv(asCLI, "1")
	// The guest tests' runs share one guest of 2 vCPUs and 2 GiB: a boot
	// and a perftest check cost more than most of their points. The
	// guest's rdmaprobe (with verbs, which this test binary may lack) is
	// built here, once, so no test is charged for it.
	if ok, _ := softroce.Available(); ok {
		dir, err := os.MkdirTemp("", "rdmaprobe-app-test-")
		if err == nil {
			_, err = verbsbin.Path(context.Background())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		sharedGuest = &vm.Shared{Shape: vm.GuestOptions{CPUs: 2, MemMiB: 2048}, Dir: dir}
		bootedGuests = sharedGuest
	}
	code := m.Run()
	if err := sshHosts.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if sharedGuest != nil {
		sharedGuest.Close()
		if err := sharedGuest.Check(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// sshHosts are the SSH hosts of the generator-host tests, made by the
// first of them and removed by TestMain (testhosts.SharedSSH): a set
// costs a second or more to make and remove, which these tests do not
// test. A test that changes a host (its link, a sysctl) puts it back.
var sshHosts = &testhosts.SharedSSH{N: 3}

// bootedGuests is the shared guest TestMain made, kept while a test
// that boots its own guest (ownGuest) has sharedGuest unset: its QEMU
// processes outlive every run and are no run's leftovers (children).
var bootedGuests *vm.Shared

// run executes a whole command in-process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(append([]string{"rdmaprobe"}, args...), Streams{In: bytes.NewReader(nil), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

func itoa(i int) string { return strconv.Itoa(i) }

// A flag that does not parse: one line on stderr naming the flag and what
// it takes, nothing on stdout (no help dump), exit status 2.
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ramp", "--backend", "sim", "--timeout", "5"}, `rdmaprobe: ramp: --timeout: "5" is not a duration such as 30s, 250ms or 1m (rdmaprobe ramp --help lists the flags)`},
		{[]string{"search", "--lo", "x"}, `rdmaprobe: search: --lo: "x" is not a whole number`},
		{[]string{"ramp", "--connect-rate", "fast"}, `rdmaprobe: ramp: --connect-rate: "fast" is not a number`},
		{[]string{"ramp", "--bogus"}, `rdmaprobe: ramp: unknown flag --bogus`},
		{[]string{"--nope"}, `rdmaprobe: unknown flag --nope (rdmaprobe --help lists the flags)`},
		{[]string{"frobnicate"}, `rdmaprobe: unknown command "frobnicate" (rdmaprobe --help lists the commands)`},
		// Flag parsing stops at the first argument: the rest must not be
		// ignored in silence.
		{[]string{"ramp", "100", "--backend", "sim"}, `rdmaprobe: ramp: unexpected argument "100": ramp takes flags only`},
		{[]string{"search", "--backend", "sim", "extra"}, `rdmaprobe: search: unexpected argument "extra"`},
	} {
		out, errOut, code := run(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, no stdout, one line starting %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
