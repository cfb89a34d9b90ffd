package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
)

// SSHConfig configures the SSH launcher.
type SSHConfig struct {
	Hosts []Host
	// Command is the ssh client's command line, default ["ssh"]. The
	// user's own ssh_config and keys apply; options given here come
	// before the launcher's and win over them (ssh takes the first
	// value it gets), e.g. ["ssh", "-F", "test/ssh_config"].
	Command []string
	// Exe is this rdmaprobe: copied to a host whose Exe is "" when the
	// host's OS and architecture are this binary's.
	Exe string
	// Fabric is what the generators open, for the hosts' descriptions.
	Fabric protocol.Fabric
	// Procs is the number of generator processes placed on the hosts.
	Procs int
	// Out, if set, is told what the preparation does.
	Out io.Writer
}

// SSH starts load generators on other hosts with the OpenSSH client, as
// pdsh and the MPI launchers do: one ssh per generator process, in
// BatchMode (a host that wants a password fails instead of waiting),
// its events coming back on ssh's stdout and its spec and release going
// out on ssh's stdin. NewSSH prepares every host first.
type SSH struct {
	cmd   []string
	hosts []*sshHost
	place []int
}

type sshHost struct {
	Host
	// addr is the host's address, us this machine's as the host sees it
	// (SSH_CONNECTION).
	addr, us string
	exe      string
	copied   bool
	env      *result.Environment
}

// sshOptions are the launcher's own: no password or host-key prompts, no
// terminal, and a dropped connection noticed within 15 s.
var sshOptions = []string{"-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
	"-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"}

// NewSSH prepares the hosts, all at once: each must answer a login,
// gets this binary copied when it has none of its own, and describes
// itself with that binary (`rdmaprobe hostinfo`), which proves it runs
// there.
func NewSSH(ctx context.Context, cfg SSHConfig) (*SSH, error) {
	if len(cfg.Hosts) == 0 {
		return nil, fmt.Errorf("ssh launcher: no hosts")
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"ssh"}
	}
	if _, err := exec.LookPath(cfg.Command[0]); err != nil {
		return nil, fmt.Errorf("ssh launcher: %s not found: install openssh-client", cfg.Command[0])
	}
	procs := max(cfg.Procs, 1)
	s := &SSH{cmd: cfg.Command, place: placement(cfg.Hosts, procs)}
	for _, h := range cfg.Hosts {
		s.hosts = append(s.hosts, &sshHost{Host: h})
	}
	errs := make([]error, len(s.hosts))
	var wg sync.WaitGroup
	for i, h := range s.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.prepare(ctx, h, cfg)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if cfg.Out != nil {
		for _, h := range s.hosts {
			how := "its own " + h.exe
			if h.copied {
				how = "this binary, copied to " + h.exe
			}
			fmt.Fprintf(cfg.Out, "host %s (%s): %d slot(s), %s\n", h.Name, h.addr, h.Slots, how)
		}
	}
	return s, nil
}

// remoteCacheDir is where copied binaries go, relative to the login
// directory, named by content so a host keeps one per build (a variable
// for tests).
var remoteCacheDir = ".cache/rdmaprobe"

// The copies a host keeps, by the rule of the vm backend's image cache
// (softroce): the remoteKeep most recently used stay however old, up to
// remoteMaxUnused; the others go once unused for remoteInUse, far longer
// than a run holds a path before it starts a generator from it (a run
// touches its copy when it prepares the host). What an interrupted copy
// left goes after remoteInUse too.
const (
	remoteKeep      = 8
	remoteInUse     = time.Hour
	remoteMaxUnused = 24 * time.Hour
)

// prepare logs in to h once to learn its system and address, and to
// find (touch) the copy of this binary it keeps from an earlier run;
// only a host without one gets a second login that copies it. A login
// to each host is the preparation's cost: seconds where sshd is busy.
func (s *SSH) prepare(ctx context.Context, h *sshHost, cfg SSHConfig) error {
	script := `uname -s; uname -m; echo "$SSH_CONNECTION"`
	var base string
	if h.Exe == "" {
		sum, err := command.FileSHA256(cfg.Exe)
		if err != nil {
			return fmt.Errorf("host %s: copy %s: %w", h.Name, cfg.Exe, err)
		}
		base = "rdmaprobe-" + sum[:16]
		script += "\n" + cacheScript(base, false)
	}
	out, err := s.run(ctx, h.Name, nil, script)
	if err != nil {
		return fmt.Errorf("host %s: %w", h.Name, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 {
		return fmt.Errorf("host %s: unexpected answer to uname: %q", h.Name, out)
	}
	osName, arch, conn := strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1]), strings.Fields(lines[2])
	if len(conn) == 4 {
		h.us, h.addr = conn[0], conn[2]
	}
	h.exe = h.Exe
	if h.exe == "" {
		if !sameOS(osName, arch) {
			return fmt.Errorf("host %s runs %s %s and this rdmaprobe is %s/%s: give its own rdmaprobe in a hostfile (%s exe=/path/to/rdmaprobe)",
				h.Name, osName, arch, runtime.GOOS, runtime.GOARCH, h.Name)
		}
		h.exe, h.copied = remoteCacheDir+"/"+base, true
		if len(lines) > 3 && strings.TrimSpace(lines[3]) == "missing" {
			if h.exe, err = s.copyBinary(ctx, h.Name, cfg.Exe); err != nil {
				return fmt.Errorf("host %s: copy %s: %w", h.Name, cfg.Exe, err)
			}
		}
	}
	f := cfg.Fabric.Generators()
	f.Addr = h.addr
	spec, _ := json.Marshal(f)
	out, err = s.run(ctx, h.Name, bytes.NewReader(append(spec, '\n')), shellJoin(h.exe, "hostinfo", "--spec", "-"))
	if err != nil {
		return fmt.Errorf("host %s: %s hostinfo: %w", h.Name, h.exe, err)
	}
	var env result.Environment
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		return fmt.Errorf("host %s: %s hostinfo said %q: %v", h.Name, h.exe, firstLine(out), err)
	}
	h.env = &env
	return nil
}

// copyBinary puts exe on host under remoteCacheDir, unless a copy with
// the same content is there (which it then touches: used), returns its
// path there, and prunes the host's other copies (remoteKeep).
func (s *SSH) copyBinary(ctx context.Context, host, exe string) (string, error) {
	sum, err := command.FileSHA256(exe)
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	base := "rdmaprobe-" + sum[:16]
	if _, err := s.run(ctx, host, f, cacheScript(base, true)); err != nil {
		return "", err
	}
	return remoteCacheDir + "/" + base, nil
}

// cacheScript touches the copy named base under remoteCacheDir, if the
// host has it; if not, it writes it from stdin (write) or prints
// "missing". Then it prunes the host's other copies (remoteKeep). A copy
// is written under a temporary name and renamed, so a copy cut short is
// never taken for a binary. The prune's failures are ignored: it leaves
// a file.
func cacheScript(base string, write bool) string {
	absent := `echo missing`
	if write {
		absent = `mkdir -p "$d" && cat >"$f.$$" && chmod 755 "$f.$$" && mv -f "$f.$$" "$f" || exit 1`
	}
	return fmt.Sprintf(`d=%s; b=%s; f="$d/$b"
if [ -x "$f" ]; then touch "$f" || exit 1; else %s; fi
cd "$d" 2>/dev/null || exit 0
find . -maxdepth 1 -name 'rdmaprobe-*.*' -mmin +%[4]d -exec rm -f {} + 2>/dev/null
find . -maxdepth 1 -name 'rdmaprobe-*' ! -name "$b" -mmin +%[5]d -exec rm -f {} + 2>/dev/null
ls -t 2>/dev/null | grep '^rdmaprobe-[0-9a-f]*$' | tail -n +%[6]d | while read -r o; do
	[ "$o" = "$b" ] || find "./$o" -maxdepth 0 -mmin +%[4]d -exec rm -f {} + 2>/dev/null
done
exit 0`, shellQuote(remoteCacheDir), shellQuote(base), absent, int(remoteInUse.Minutes()), int(remoteMaxUnused.Minutes()), remoteKeep+1)
}

// run runs a command line on host and returns its stdout; an error
// carries ssh's or the command's last words.
func (s *SSH) run(ctx context.Context, host string, stdin io.Reader, line string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cmd[0], s.args(host, line)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := command.LastLinesJoined(stderr.String(), 2, "; "); msg != "" {
			return "", fmt.Errorf("%s (%v)", msg, err)
		}
		return "", err
	}
	return stdout.String(), nil
}

// args are ssh's arguments for running command on host.
func (s *SSH) args(host, command string) []string {
	args := append(append(append([]string(nil), s.cmd[1:]...), sshOptions...), host, "--", command)
	return args
}

// Command runs generator i as `rdmaprobe clients --spec -` on its host,
// inside a wrapper that reports the generator's exit status as an
// event: with it, a generator that died is told from a connection that
// dropped (ssh exits 255 for both).
func (s *SSH) Command(i int, args, env []string) (*exec.Cmd, error) {
	h := s.hosts[s.place[i]]
	return exec.Command(s.cmd[0], s.args(h.Name, shellJoin(wrapped(h.exe, args, env)...))...), nil
}

// exitWrapper runs "$@" and then says how it ended, as a protocol.Event.
const exitWrapper = `"$@"; s=$?; printf '{"event":"exit","status":%d}\n' "$s"; exit "$s"`

// wrapped is the argv that runs exe with args (under env, if any) on a
// host inside exitWrapper, for either launcher.
func wrapped(exe string, args, env []string) []string {
	argv := []string{"sh", "-c", exitWrapper, "rdmaprobe"}
	if len(env) > 0 {
		argv = append(append(argv, "env"), env...)
	}
	return append(append(argv, exe), args...)
}

// Host is generator i's host.
func (s *SSH) Host(i int) string { return s.hosts[s.place[i]].Name }

// Addr is generator i's host's address as SSH reached it.
func (s *SSH) Addr(i int) string { return s.hosts[s.place[i]].addr }

// Name is "ssh".
func (s *SSH) Name() string { return "ssh" }

// ServerAddr is this machine's address as the first host sees it: where
// generators there reach a server here, unless --server-addr says.
func (s *SSH) ServerAddr() string { return s.hosts[0].us }

// Hosts describes the hosts for the run record.
func (s *SSH) Hosts() []result.Host {
	var out []result.Host
	for _, h := range s.hosts {
		out = append(out, result.Host{Name: h.Name, Launcher: "ssh", Slots: h.Slots, Addr: h.addr,
			Exe: h.exe, Copied: h.copied, Environment: h.env})
	}
	return out
}

// Kill kills pid on generator i's host over a new SSH connection.
func (s *SSH) Kill(i, pid int) { s.Signal(i, pid, "KILL") }

// Signal sends sig to pid on generator i's host over a new SSH
// connection.
func (s *SSH) Signal(i, pid int, sig string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.run(ctx, s.Host(i), nil, fmt.Sprintf("kill -%s %d", shellQuote(sig), pid))
}

// Fault classifies how generator i's ssh ended before the generator
// reported: ssh exits 255 for its own errors, and the wrapper's exit
// event tells the generator's exit apart.
func (s *SSH) Fault(i int, e runner.Ended) (string, string) {
	switch {
	case e.Exit != nil:
		return result.FaultDied, exitDetail(*e.Exit, e.Stderr)
	case e.Code == 255 && !e.Started:
		return result.FaultUnreachable, orDefault(e.Stderr, "ssh exited 255 before the generator started")
	case e.Code == 255:
		return result.FaultConnectionLost, orDefault(e.Stderr, "ssh exited 255 after the generator started")
	case !e.Started:
		return result.FaultUnreachable, fmt.Sprintf("ssh exited %d before the generator started: %s", e.Code, e.Stderr)
	}
	return result.FaultLauncher, fmt.Sprintf("ssh exited %d: %s", e.Code, e.Stderr)
}

// exitDetail says how a generator exited: its status (a signal above
// 128) and its last words.
func exitDetail(status int, stderr string) string {
	s := fmt.Sprintf("exit status %d", status)
	if status > 128 {
		s = fmt.Sprintf("killed by signal %d", status-128)
	}
	if stderr != "" {
		s += ": " + stderr
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sameOS reports whether uname's system and machine are this binary's.
func sameOS(system, machine string) bool {
	arch := map[string]string{"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}
	return strings.EqualFold(system, runtime.GOOS) && arch[machine] == runtime.GOARCH
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellJoin quotes each word and joins them: one command line for the
// remote shell.
func shellJoin(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shellQuote(w)
	}
	return strings.Join(q, " ")
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
