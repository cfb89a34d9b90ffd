package runner

import "os/exec"

// Launcher places load generators: it makes the command that runs one
// generator's process, `rdmaprobe clients --spec -`, wherever that
// generator runs. The process reads its GeneratorSpec and then its
// release from stdin and writes events on stdout (Event), so over any
// pipe, a remote shell's or a job launcher's included, it is the same
// child. launch_local.go starts it on this machine; another placement is
// another Launcher in a file of its own.
type Launcher interface {
	// Command returns the command of generator i: rdmaprobe with args,
	// and env (KEY=VALUE) added to its environment. The runner starts
	// it, owns its pipes and reaps it.
	Command(i int, args, env []string) (*exec.Cmd, error)
	// Host names where generator i runs; "" is this machine, whose
	// generator processes the collectors sample.
	Host(i int) string
}
