package launch

import (
	"fmt"
	"os"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/internal/testhosts"
)

// sshHosts are the SSH hosts of this package's tests, made once for all
// of them (testhosts.SharedSSH).
var sshHosts = &testhosts.SharedSSH{N: 2}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := sshHosts.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
