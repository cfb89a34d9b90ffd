package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --client-kind rdmacm's mistakes are refused in one line before
// anything starts: private data past what a connect request carries
// (as hex and as @file), bad hex, no server, and kinds that contradict
// --client-cmd.
func TestClientKindRefusals(t *testing.T) {
	big := filepath.Join(t.TempDir(), "pd")
	if err := os.WriteFile(big, make([]byte, 57), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := []string{"--server-cmd", "true {port}"}
	cases := []struct {
		args []string
		want string
	}{
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", strings.Repeat("ab", 57)}, srv...), "57 bytes: an RC connect request carries at most 56"},
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", "@" + big}, srv...), "57 bytes"},
		{append([]string{"--client-kind", "rdmacm", "--cm-private-data", "xyz"}, srv...), "want hex digits or @file"},
		{[]string{"--client-kind", "rdmacm"}, "needs an rdma_cm server: --server-cmd"},
		{append([]string{"--client-kind", "rdmacm", "--client-cmd", "true"}, srv...), "one or the other"},
		{append([]string{"--client-kind", "command"}, srv...), "needs --client-cmd"},
		{append([]string{"--client-kind", "tcp"}, srv...), "want builtin, rdmacm or command"},
		{append([]string{"--cm-private-data", "00"}, srv...), "goes with --client-kind rdmacm"},
		{append([]string{"--client-kind", "rdmacm", "--criterion", "traffic"}, srv...), "rdma_cm clients (--client-kind rdmacm) run no traffic phase"},
	}
	for _, c := range cases {
		args := append([]string{"ramp", "--backend", "sim", "--clients", "1", "--results", t.TempDir()}, c.args...)
		_, errOut, code := run(t, args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", c.args, code, errOut, ExitUsage, c.want)
		}
	}
}
