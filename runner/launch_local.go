package runner

import (
	"os"
	"os/exec"
)

// localLauncher runs generators as children of this process.
type localLauncher struct{ exe string }

func (l localLauncher) Command(i int, args, env []string) (*exec.Cmd, error) {
	cmd := exec.Command(l.exe, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return cmd, nil
}

func (localLauncher) Host(int) string { return "" }
