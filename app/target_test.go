package app

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// marked lists the processes whose command line holds mark: what a test
// that put mark in every command it ran expects to be gone afterwards.
func marked(t *testing.T, mark string) []string {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	var left []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), mark) {
			left = append(left, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return left
}

// nothingLeft asserts that no process of the test's commands is left,
// and no child of the test (zombies included).
func nothingLeft(t *testing.T, mark string) {
	t.Helper()
	if left := marked(t, mark); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	noChildren(t)
}

// A command that cannot run is refused before anything starts: one line,
// exit 2, no run saved.
func TestTargetBadCommands(t *testing.T) {
	root := t.TempDir()
	noexec := filepath.Join(t.TempDir(), "server")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server-cmd", "/nonexistent/server -p {port}"}, "--server-cmd: /nonexistent/server: no such file"},
		{[]string{"--server-cmd", noexec + " -p {port}"}, "--server-cmd: " + noexec + ": not executable"},
		{[]string{"--server-cmd", "no-such-server-xyz -p {port}"}, "not found in $PATH"},
		{[]string{"--server-cmd", "sh -c 'exec srv' {prot}"}, "--server-cmd: argument 3 (\"{prot}\"): unknown placeholder {prot}"},
		{[]string{"--server-cmd", "sh -c 'unterminated"}, "--server-cmd: unterminated ' quote"},
		{[]string{"--server-cmd", "sh -c x", "--server-build", "make N={nn}"}, "--server-build: argument 1 (\"N={nn}\"): unknown placeholder {nn}"},
		{[]string{"--server-cmd", "sh -c x", "--server-ready", "("}, "--server-ready: error parsing regexp"},
		{[]string{"--client-cmd", "sh -c x {j}"}, "--client-cmd: argument 3 (\"{j}\"): unknown placeholder {j}"},
		{[]string{"--client-cmd", "{build}/client"}, "--client-cmd: argument 0 (\"{build}/client\"): unknown placeholder {build}"},
		{[]string{"--client-cmd", "sh -c x", "--client-count", "held"}, "held clients (--client-count held) need --client-ok"},
		{[]string{"--client-cmd", "sh -c x", "--client-stdin", `a\q`}, `--client-stdin: unknown escape \q`},
		{[]string{"--server-port", "4433"}, "--server-port goes with --server-cmd"},
	} {
		args := append([]string{"ramp", "--backend", "sim", "--clients", "2", "--results", root}, tc.args...)
		out, errOut, code := run(t, args...)
		if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) || strings.Contains(out, "clients:") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", tc.args, code, errOut, tc.want)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("a refused command saved %d runs", len(ents))
	}
	noChildren(t)
}

// A build that fails is each point's failure with its last words; the
// run goes on, keeps every point, and builds again next time.
func TestTargetBuildFails(t *testing.T) {
	root, mark := t.TempDir(), "mark-build-"+strconv.Itoa(os.Getpid())
	_, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "2,3", "--calibrate", "0", "--results", root,
		"--server-build", "sh -c 'echo \"server.c:7: error: MAX_CLIENTS undeclared\" >&2; exit 1' "+mark+" {n}",
		"--server-cmd", "sh -c 'exec tail -f /dev/null' "+mark+" {build}")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	run := loadOnlyRun(t, root)
	if len(run.Points) != 2 || !run.Complete {
		t.Fatalf("points %v, complete %v", clientsOf(run), run.Complete)
	}
	for _, p := range run.Points {
		if !strings.Contains(p.Error, "MAX_CLIENTS undeclared") || !strings.Contains(p.Error, "exit status 1") ||
			p.Passed || p.Attempted != p.Clients || p.Connected != 0 {
			t.Errorf("%d clients: error %q, passed %v, %d/%d", p.Clients, p.Error, p.Passed, p.Connected, p.Attempted)
		}
	}
	if run.Target == nil || len(run.Target.BuildCommand) == 0 {
		t.Errorf("run target %+v", run.Target)
	}
	nothingLeft(t, mark)
}

// A server that never becomes ready, and one that exits before it is:
// the point's error says which, with its last words, and nothing is left.
func TestTargetNotReady(t *testing.T) {
	for _, tc := range []struct {
		name, server, want string
	}{
		{"never", `sh -c 'echo starting up; exec tail -f /dev/null' MARK`, "server not ready after"},
		{"exits", `sh -c 'echo "bind: Address already in use" >&2; exit 3' MARK`, "server exited (exit status 3) before it was ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, mark := t.TempDir(), "mark-ready-"+tc.name+strconv.Itoa(os.Getpid())
			_, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "2", "--calibrate", "0", "--results", root,
				"--server-cmd", strings.ReplaceAll(tc.server, "MARK", mark), "--server-start-timeout", "1s",
				"--client-cmd", "sh -c 'echo never run' "+mark)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			p := loadOnlyRun(t, root).Points[0]
			if !strings.Contains(p.Error, tc.want) || p.Connected != 0 || p.Target == nil || p.Target.PID == 0 {
				t.Errorf("point error %q, connected %d, target %+v", p.Error, p.Connected, p.Target)
			}
			if tc.name == "exits" && !strings.Contains(p.Error, "Address already in use") {
				t.Errorf("point error %q lacks the server's last words", p.Error)
			}
			if tc.name == "never" && !strings.Contains(p.Error, "starting up") {
				t.Errorf("point error %q lacks the server's last words", p.Error)
			}
			nothingLeft(t, mark)
		})
	}
}

// A server that ignores SIGTERM is killed after the grace period; a
// client that never exits and one that floods its output are timeouts
// with bounded tails; the rest connect. Everything is reaped.
func TestTargetStubbornServerAndClients(t *testing.T) {
	root, mark := t.TempDir(), "mark-stubborn-"+strconv.Itoa(os.Getpid())
	client := `sh -c 'case $0 in 0) exec tail -f /dev/null;; 1) exec yes flood;; *) echo "connected $0";; esac' {i} ` + mark
	_, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "5", "--calibrate", "0", "--results", root,
		"--timeout", "1500ms", "--server-stop-grace", "200ms",
		"--server-cmd", `sh -c 'trap "" TERM; echo ready; exec tail -f /dev/null' `+mark, "--server-ready", "^ready$",
		"--client-cmd", client, "--client-ok", "^connected", "--client-count", "launched")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	run := loadOnlyRun(t, root)
	p := run.Points[0]
	if p.Outcomes[result.OutcomeOK] != 3 || p.Outcomes[result.OutcomeTimeout] != 2 {
		t.Errorf("outcomes %v, want 3 ok and 2 timeouts", p.Outcomes)
	}
	flood := p.Records[1]
	if flood.Outcome != result.OutcomeTimeout || flood.Command == nil || len(flood.Command.Tail) > 512 ||
		flood.Command.OutputBytes < 1<<16 || !isFlood(flood.Command.Tail) {
		t.Errorf("flooding client %+v %+v", flood, flood.Command)
	}
	if r := p.Records[3]; r.Outcome != result.OutcomeOK || r.ConnectUS <= 0 || r.Command.Tail != "" {
		t.Errorf("connected client %+v", r)
	}
	if p.Target == nil || !strings.Contains(p.Target.Exit, "killed") || !strings.Contains(p.Server.ExitError, "did not exit within 200ms of SIGTERM") {
		t.Errorf("server: target %+v, exit error %q", p.Target, p.Server.ExitError)
	}
	if run.Target == nil || run.Target.Counting != "launched" || run.Target.Ready != "^ready$" || run.Target.Binaries["/usr/bin/sh"] == "" && run.Target.Binaries["/bin/sh"] == "" {
		t.Errorf("run target %+v", run.Target)
	}
	nothingLeft(t, mark)
}

// isFlood reports whether tail is the end of `yes flood`'s output: whole
// lines, but for a last one that a kill may have cut short.
func isFlood(tail string) bool {
	lines := strings.Split(tail, "\n")
	if len(lines) < 3 {
		return false
	}
	for i, l := range lines {
		whole := l == "flood"
		if i == 0 || i == len(lines)-1 { // the tail's cut and the kill's
			whole = strings.HasSuffix("flood", l) || strings.HasPrefix("flood", l)
		}
		if !whole {
			return false
		}
	}
	return true
}

// rdmaprobe's own server and client, run as commands: the outcomes agree
// with the built-in path (the client over the cap refused), the held
// clients stay until all are in, and the server dying mid-point is the
// point's error with nothing left behind.
func TestTargetServeAsCommand(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	server := exe + " serve --backend sim --listen 127.0.0.1:{port} --max-clients {max} --cert-out {dir}/server.pem --client-cert-out {dir}/client.pem --client-key-out {dir}/client.key"
	client := exe + " clients --backend sim --addr {addr}:{port} --n 1 --id-base {i} --ca {dir}/server.pem --cert {dir}/client.pem --key {dir}/client.key --rounds 1 --msg-size 64 --hold-stdin"
	common := []string{"ramp", "--backend", "sim", "--clients", "5", "--max-clients", "4", "--traffic", "0", "--calibrate", "0", "--rounds", "1", "--msg-size", "64"}

	builtinRoot, cmdRoot := t.TempDir(), t.TempDir()
	if _, errOut, code := run(t, append(common, "--results", builtinRoot)...); code != 0 {
		t.Fatalf("built-in: exit %d: %s", code, errOut)
	}
	if _, errOut, code := run(t, append(common, "--results", cmdRoot, "--server-cmd", server, "--client-cmd", client,
		"--client-ok", `^1/1 clients connected`)...); code != 0 {
		t.Fatalf("commands: exit %d: %s", code, errOut)
	}
	b, c := loadOnlyRun(t, builtinRoot).Points[0], loadOnlyRun(t, cmdRoot).Points[0]
	if b.Connected != 4 || b.Outcomes[result.OutcomeRefused] != 1 {
		t.Fatalf("built-in outcomes %v", b.Outcomes)
	}
	if c.Connected != b.Connected || c.Outcomes[result.OutcomeExit] != 1 {
		t.Errorf("commands: %d connected, outcomes %v; built-in %d, %v", c.Connected, c.Outcomes, b.Connected, b.Outcomes)
	}
	for _, r := range c.Records {
		if r.Outcome == result.OutcomeExit && !strings.Contains(r.Command.Tail, "refused-at-capacity 1") {
			t.Errorf("refused client's output %q", r.Command.Tail)
		}
	}
	if !strings.Contains(c.Target.Tail, "1 refused at capacity") || c.Server.ExitError != "" {
		t.Errorf("server command: tail %q, exit error %q", c.Target.Tail, c.Server.ExitError)
	}
	if c.Diagnosis == nil || c.Diagnosis.Limit != "max-clients" {
		t.Errorf("diagnosis %+v, want max-clients", c.Diagnosis)
	}
	noChildren(t)

	// Killed during the point, once some of its clients are connected:
	// launched four a second, the last ones are still to come then (all
	// at once, the point could end before the kill), and the launches
	// after the kill take about 1 s.
	root := t.TempDir()
	cmd := runAsync(t, "ramp", "--backend", "sim", "--clients", "6", "--connect-rate", "4", "--calibrate", "0", "--rounds", "1", "--msg-size", "64",
		"--timeout", "20s", "--results", root, "--server-cmd", server, "--client-cmd", client, "--client-ok", `^1/1 clients connected`)
	srv := childPID(t, "serve")
	serving(t, srv, 3)
	if err := syscall.Kill(srv, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-cmd.done
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	p := loadOnlyRun(t, root).Points[0]
	if !strings.Contains(p.Error, "server died during the point") || !strings.Contains(p.Error, "SIGKILL") || p.Passed {
		t.Errorf("point error %q, passed %v", p.Error, p.Passed)
	}
	nothingLeft(t, exe+"\x00clients")
}

// A server that speaks rdmaprobe's own exchange, given as a command, is
// probed with the built-in clients: it takes the run's certificates
// ({cert}, {key}, {client_ca}), and the phases are timed as usual. A
// fixed port is free again for the second point.
func TestTargetBuiltinClients(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	root := t.TempDir()
	_, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "3,3", "--traffic", "0", "--calibrate", "0", "--rounds", "1", "--msg-size", "64",
		"--results", root, "--server-port", strconv.Itoa(port),
		"--server-cmd", exe+" serve --backend sim --listen 127.0.0.1:{port} --max-clients {max} --cert {cert} --key {key} --client-ca {client_ca}")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	run := loadOnlyRun(t, root)
	for _, p := range run.Points {
		if !p.Passed || p.Phases[result.PhaseTLS].N != 3 || !strings.Contains(strings.Join(p.Target.Argv, " "), "127.0.0.1:"+strconv.Itoa(port)) {
			t.Errorf("%d clients trial %d: passed %v, TLS phases %+v, argv %v", p.Clients, p.Trial, p.Passed, p.Phases[result.PhaseTLS], p.Target.Argv)
		}
	}
	if run.PSN.Connections != 6 || !run.PSN.Unique {
		t.Errorf("PSN check %+v", run.PSN)
	}
	noChildren(t)
}

func TestIsFlood(t *testing.T) {
	for tail, want := range map[string]bool{"flood\nflood\nflood\n": true, "ood\nflood\nflood\nfloo": true, "flood\nflood\n": true,
		"flood\nfl0od\nflood\n": false, "nope": false, "": false} {
		if got := isFlood(tail); got != want {
			t.Errorf("isFlood(%q) = %v", tail, got)
		}
	}
}

// A one-shot server command (it serves its clients and exits 0, as
// ibv_rc_pingpong's does) under launched clients: when every client
// succeeded its exit is its work done, not a death; when a client
// failed, the server's exit is the point's error as before.
func TestTargetOneShotServer(t *testing.T) {
	mark := "mark-oneshot-" + strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		clientExit string
		wantErr    bool
	}{{"0", false}, {"3", true}} {
		root := t.TempDir()
		_, errOut, code := run(t, "ramp", "--backend", "sim", "--clients", "1", "--calibrate", "0", "--results", root, "--timeout", "20s",
			"--server-cmd", `sh -c 'mkfifo {dir}/f && echo ready && read x < {dir}/f' `+mark, "--server-ready", "^ready$",
			"--client-cmd", `sh -c 'echo hi > {dir}/f; exit $0' `+tc.clientExit+" "+mark, "--client-count", "launched")
		if code != 0 && !tc.wantErr {
			t.Fatalf("client exit %s: exit %d: %s", tc.clientExit, code, errOut)
		}
		p := loadOnlyRun(t, root).Points[0]
		died := strings.HasPrefix(p.Error, "server died during the point: server exit status 0")
		if tc.wantErr != died || tc.wantErr == p.Passed || p.Target == nil || !strings.HasPrefix(p.Target.Exit, "exit status 0") {
			t.Errorf("client exit %s: passed %v, error %q, server exit %+v, error %q", tc.clientExit, p.Passed, p.Error, p.Target, p.Server.ExitError)
		}
		if !tc.wantErr && (p.Connected != 1 || p.Server.ExitError != "") {
			t.Errorf("one-shot server: %d connected, exit error %q", p.Connected, p.Server.ExitError)
		}
	}
	nothingLeft(t, mark)
}
