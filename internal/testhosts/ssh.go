package testhosts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SSH is a set of client hosts reachable over SSH (scripts/testhosts.sh):
// each a network namespace with its own address and sshd.
type SSH struct {
	// Dir holds the set's keys and configuration.
	Dir string
	// Config is an ssh_config for `ssh -F`: it names the hosts, the
	// generated client key and known_hosts, with BatchMode on.
	Config string
	// Hostfile lists the hosts with slots, mpirun-style.
	Hostfile string
	// Hosts are the hosts' names in Config: h1..hN.
	Hosts []string
	// Addrs[i] is Hosts[i]'s address.
	Addrs []string
	// ServerAddr is this machine's own address on the hosts' link: what
	// a server here listens on for clients on the hosts.
	ServerAddr string

	subnet string
	sshd   map[int]bool // the listeners' PIDs
}

// StartSSH makes n client hosts for the test; its clean-up removes them.
func StartSSH(t testing.TB, n int) *SSH {
	t.Helper()
	needSSH(t)
	s, sc, err := startSSH(t.TempDir(), n)
	held(t, "testhosts.sh", sc, err)
	return s
}

func needSSH(t testing.TB) {
	t.Helper()
	need(t, "SSH test hosts", "ip", "ssh", "ssh-keygen", "/usr/sbin/sshd", "flock", "realpath")
}

// startSSH makes n hosts with their state in dir; the script holds them
// until stopped (and is returned to be stopped with an error too).
func startSSH(dir string, n int) (*SSH, *script, error) {
	envFile, sc, err := runScript(2*time.Minute, "testhosts.sh", dir, strconv.Itoa(n))
	if err != nil {
		return nil, sc, err
	}
	env, err := readEnv(envFile)
	if err != nil {
		return nil, sc, err
	}
	s := &SSH{
		Dir:        dir,
		Config:     filepath.Join(dir, "ssh_config"),
		Hostfile:   filepath.Join(dir, "hostfile"),
		Hosts:      strings.Fields(env["HOSTS"]),
		Addrs:      strings.Fields(env["ADDRS"]),
		ServerAddr: env["SERVER_ADDR"],
		subnet:     env["SUBNET"],
		sshd:       map[int]bool{},
	}
	for _, p := range strings.Fields(env["SSHD_PIDS"]) {
		pid, _ := strconv.Atoi(p)
		s.sshd[pid] = true
	}
	if len(s.Hosts) != n || len(s.Addrs) != n || s.ServerAddr == "" {
		return nil, sc, fmt.Errorf("testhosts.sh wrote %v", env)
	}
	return s, sc, nil
}

// SharedSSH lends one set of N hosts to the tests of a package, which run
// one at a time: the first Get makes it, and Close (in TestMain, after
// m.Run) removes it. Making a set costs seconds (keys, namespaces, sshd
// answering), and a test needs the hosts, not their making, which
// TestSSHHosts tests. Each test must leave nothing running on them: Get
// fails the test that finds anything.
type SharedSSH struct {
	N    int
	once sync.Once
	dir  string
	s    *SSH
	sc   *script
	err  error
}

// Get returns the set, made at the first call.
func (p *SharedSSH) Get(t testing.TB) *SSH {
	t.Helper()
	needSSH(t)
	p.once.Do(func() {
		if p.dir, p.err = os.MkdirTemp("", "testhosts-"); p.err == nil {
			p.s, p.sc, p.err = startSSH(p.dir, p.N)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	for _, h := range p.s.Hosts {
		if left, err := WaitNoProcs(20*time.Second, func() ([]Proc, error) { return p.s.Programs(h) }); err != nil || len(left) > 0 {
			t.Fatalf("left running on the shared host %s by an earlier test: %v %v", h, left, err)
		}
	}
	return p.s
}

// PID is the set's script (testhosts.sh run), a child of the test
// binary for as long as the set lives, which a test that looks for the
// processes it left must pass over; 0 before the set is made.
func (p *SharedSSH) PID() int {
	if p.sc == nil {
		return 0
	}
	return p.sc.cmd.Process.Pid
}

// Close removes the set, if one was made.
func (p *SharedSSH) Close() error {
	var err error
	if p.sc != nil {
		err = p.sc.stop("testhosts.sh")
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
	return err
}

// SSHCommand is the ssh client command line that reaches the hosts:
// ssh -F <Config>.
func (s *SSH) SSHCommand() []string { return []string{"ssh", "-F", s.Config} }

// Command runs argv on host over SSH.
func (s *SSH) Command(ctx context.Context, host string, argv ...string) *exec.Cmd {
	args := append(append(s.SSHCommand()[1:], host, "--"), argv...)
	return exec.CommandContext(ctx, "ssh", args...)
}

// NetNS is the network namespace that is host.
func (s *SSH) NetNS(host string) string {
	return fmt.Sprintf("rdmaprobe-%s-%s", s.subnet, host)
}

// Procs lists what runs on host besides its sshd listener: the sessions'
// sshd processes and whatever they started.
func (s *SSH) Procs(host string) ([]Proc, error) {
	return netnsProcs(s.NetNS(host), func(p Proc) bool { return s.sshd[p.PID] })
}

// Programs lists what runs on host besides sshd itself (listener and
// session processes): the programs sessions started.
func (s *SSH) Programs(host string) ([]Proc, error) {
	return netnsProcs(s.NetNS(host), func(p Proc) bool {
		return s.sshd[p.PID] || p.Comm == "sshd"
	})
}

// DropSessions ends host's SSH sessions the way a reset connection does:
// it kills their sshd processes on the host (by PID), so the clients see
// the connection closed and what the sessions ran sees its stdin end.
func (s *SSH) DropSessions(host string) (int, error) {
	procs, err := s.Procs(host)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range procs {
		if p.Comm == "sshd" {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// SetLink takes host's link down or up: while it is down, nothing
// reaches the host and its sessions hear nothing (a cable pulled).
func (s *SSH) SetLink(host string, up bool) error {
	i := strings.TrimPrefix(host, "h")
	state := "down"
	if up {
		state = "up"
	}
	out, err := exec.Command("ip", "link", "set", "rp"+s.subnet+"-"+i, state).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link set %s: %v: %s", state, err, out)
	}
	return nil
}

// Sysctl sets key (dotted) to value on host: what its network namespace
// has of its own, such as net.ipv4.ip_local_port_range.
func (s *SSH) Sysctl(host, key, value string) error {
	out, err := exec.Command("ip", "netns", "exec", s.NetNS(host), "sysctl", "-qw", key+"="+value).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sysctl %s=%s on %s: %v: %s", key, value, host, err, out)
	}
	return nil
}
