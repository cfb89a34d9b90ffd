package app

import (
	"bytes"
	"os"
	"strconv"
	"testing"
)

// The runner starts this test binary as the server and load generators;
// with this variable set it behaves as the rdmaprobe command.
const asCLI = "RDMAPROBE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		os.Exit(Main(os.Args, Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	os.Setenv(asCLI, "1")
	os.Exit(m.Run())
}

// run executes a whole command in-process.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(append([]string{"rdmaprobe"}, args...), Streams{In: bytes.NewReader(nil), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

func itoa(i int) string { return strconv.Itoa(i) }
