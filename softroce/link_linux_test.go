package softroce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/internal/parts"
)

// TestGuestLink boots two guests joined by a link and shows RDMA across
// it: an RC connection between ibv_rc_pingpong in one guest and in the
// other, whose QPs each kernel lists as connected to the other's
// (lqpn/rqpn crossed), with the link device's packet counters moving on
// both sides; and a login over SSH from the first guest to the second's
// sshd, which is how load generators reach a second host.
func TestGuestLink(t *testing.T) {
	for _, tool := range []string{"ssh", "ssh-keygen", "/usr/sbin/sshd"} {
		// CI installs openssh-server and -client, so there this never skips.
		if _, err := exec.LookPath(tool); err != nil {
			parts.Missing(t, "%s not installed (Debian packages openssh-server, openssh-client; scripts/setup.sh installs them)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, b := bootLinkedGuests(t, ctx)

	for name, g := range map[string]*Guest{"a": a, "b": b} {
		l := g.Ready.Link
		if l == nil || !strings.Contains(l.PortState, "ACTIVE") || l.GIDIndex < 0 {
			t.Fatalf("guest %s: link device at ready: %+v", name, l)
		}
		t.Logf("guest %s: %s on %s %s (%s), GIDs %v, setup %v ms", name, l.Device, l.Netdev, l.Addr, l.MAC, l.GIDs, g.Ready.SetupMS)
	}
	t.Run("rc-pingpong", func(t *testing.T) {
		argv := func(g *Guest, iters int) []string {
			// -e: sleep on completion events. A busy-polling process
			// pins its guest's vCPU, and two such guests starve the
			// host threads that carry the link's frames.
			return []string{"ibv_rc_pingpong", "-d", LinkRxe, "-g", strconv.Itoa(g.Ready.Link.GIDIndex),
				"-p", strconv.Itoa(linkTestPort), "-s", "64", "-n", strconv.Itoa(iters), "-e", "-c"}
		}
		// Both guests would give their first QP on rxe2 the same number,
		// and a check that each QP's remote is the other's local number
		// would pass whichever peer it had: spend one QP number in guest
		// a first (a pingpong server that creates its QP and times out
		// waiting for a client).
		if r, err := a.Exec(ctx, 2*time.Second, argv(a, 1)...); err != nil || !r.TimedOut {
			t.Fatalf("spending a QP number in guest a: %+v %v", r, err)
		}
		// Each kernel must be seen holding its side of the connection
		// while it runs; how long a run lasts depends on the host's load,
		// so a run over before both were seen is repeated, longer.
		for iters := 1000; ; iters *= 4 {
			qa, qb, seen := pingpongAcross(t, ctx, a, b, argv, iters)
			if !seen {
				if iters >= 64000 {
					t.Fatalf("%d iterations ended before both kernels were seen with the connection", iters)
				}
				t.Logf("%d iterations ended before both kernels were seen with the connection; again with more", iters)
				continue
			}
			t.Logf("guest a QP %+v, guest b QP %+v", qa, qb)
			if qa.LQPN == qb.LQPN || qa.RQPN != qb.LQPN || qb.RQPN != qa.LQPN {
				t.Errorf("the kernels' QPs are not each other's peers: a %+v, b %+v", qa, qb)
			}
			break
		}
	})

	t.Run("ssh", func(t *testing.T) {
		startSSHD(t, ctx, a, b)
		r, err := a.Exec(ctx, time.Minute, "ssh", "-F", "/etc/ssh/ssh_config", "peer", "rdma", "-j", "link", "show")
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("ssh peer rdma link show: %v exit %d %s", err, r.ExitCode, r.Stderr)
		}
		var links []struct {
			IfName string `json:"ifname"`
			Netdev string `json:"netdev"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &links); err != nil {
			t.Fatalf("rdma link show over ssh: %v: %s", err, r.Stdout)
		}
		found := false
		for _, l := range links {
			found = found || (l.IfName == LinkRxe && l.Netdev == LinkNetdev)
		}
		if !found {
			t.Errorf("guest b's devices seen over ssh: %s", r.Stdout)
		}
	})
}

// linkTestPort is ibv_rc_pingpong's TCP port in TestGuestLink.
const linkTestPort = 18520

// pingpongAcross runs ibv_rc_pingpong (iters round trips, every
// received buffer validated) with its server in b and client in a, and
// checks that it succeeds and that the link device's packet counters in
// both guests grew by at least iters. It returns each side's QP if both
// were seen in RTS while the run lasted.
func pingpongAcross(t *testing.T, ctx context.Context, a, b *Guest, argv func(*Guest, int) []string, iters int) (qa, qb rcQP, seen bool) {
	t.Helper()
	peer := strings.Split(b.Ready.Link.Addr, "/")[0]
	pktsA, pktsB := linkCounters(t, ctx, a), linkCounters(t, ctx, b)
	type done struct {
		r   ExecResult
		err error
	}
	server := make(chan done, 1)
	go func() {
		r, err := b.Exec(ctx, 3*time.Minute, argv(b, iters)...)
		server <- done{r, err}
	}()
	waitGuest(t, ctx, "ibv_rc_pingpong to listen in guest b", func() bool {
		raw, err := b.Call(ctx, OpListening, linkTestPort, nil)
		return err == nil && string(raw) == "true"
	})
	client := make(chan done, 1)
	go func() {
		r, err := a.Exec(ctx, 3*time.Minute, append(argv(a, iters), peer)...)
		client <- done{r, err}
	}()
	// Poll each kernel until it shows the QP or the client is done.
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var okA, okB bool
	for _, w := range []struct {
		g   *Guest
		out *rcQP
		ok  *bool
	}{{a, &qa, &okA}, {b, &qb, &okB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				if q, ok := pingpongQP(pctx, w.g); ok {
					*w.out, *w.ok = q, true
					return
				}
			}
		}()
	}
	c := <-client
	s := <-server
	stop()
	wg.Wait()
	if c.err != nil || s.err != nil {
		t.Fatalf("client %v, server %v", c.err, s.err)
	}
	if c.r.ExitCode != 0 || s.r.ExitCode != 0 {
		t.Fatalf("ibv_rc_pingpong across the link: client exit %d %q, server exit %d %q",
			c.r.ExitCode, tail(c.r.Stderr), s.r.ExitCode, tail(s.r.Stderr))
	}
	figs, err := ParsePingpong(c.r.Stdout + c.r.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ibv_rc_pingpong across the link (64 B, %d iters, validated): %.1f usec/iter", iters, figs["usec/iter"])
	// Every iteration is a SEND each way over the link: the link
	// device's counters in each guest count them.
	afterA, afterB := linkCounters(t, ctx, a), linkCounters(t, ctx, b)
	for _, d := range []struct {
		name          string
		before, after map[string]int64
	}{{"a", pktsA, afterA}, {"b", pktsB, afterB}} {
		sent, rcvd := d.after["sent_pkts"]-d.before["sent_pkts"], d.after["rcvd_pkts"]-d.before["rcvd_pkts"]
		if sent < int64(iters) || rcvd < int64(iters) {
			t.Errorf("guest %s: %s sent %d and received %d packets during %d iterations", d.name, LinkRxe, sent, rcvd, iters)
		}
	}
	return qa, qb, okA && okB
}

// bootLinkedGuests boots two guests, a (169.254.77.1) and b
// (169.254.77.2), on one link; they run until the test ends.
func bootLinkedGuests(t *testing.T, ctx context.Context) (*Guest, *Guest) {
	t.Helper()
	if ok, why := Available(); !ok {
		parts.Missing(t, "vm backend unavailable: %s", why)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// /bin/sh by that path: sshd runs commands with root's login shell.
	extra := append([]string{"/usr/sbin/sshd", "ssh", "/bin/sh"}, DefaultExtraBinaries...)
	img, err := BuildImage(ctx, ImageConfig{Binary: exe, ExtraBinaries: extra, CacheDir: testCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	ea, eb, err := NewLink()
	if err != nil {
		t.Fatal(err)
	}
	defer ea.Close()
	defer eb.Close()
	guests := make([]*Guest, 2)
	errs := make([]error, 2)
	logs := []string{filepath.Join(t.TempDir(), "a.log"), filepath.Join(t.TempDir(), "b.log")}
	var wg sync.WaitGroup
	for i, end := range []*LinkEnd{ea, eb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 2 GiB each: two guests share this machine. Two vCPUs, not
			// one: rxe's tasklets and a busy-polling process on a single
			// vCPU take turns by timeslice (measured: 8.8 ms per
			// ibv_rc_pingpong round trip with one vCPU each).
			guests[i], errs[i] = Boot(ctx, BootConfig{Image: img, CPUs: 2, MemMiB: 2048, LogPath: logs[i], Link: end})
		}()
	}
	wg.Wait()
	for i, g := range guests {
		if g != nil {
			t.Cleanup(func() {
				if err := g.Close(); err != nil {
					t.Errorf("guest %c: close: %v", 'a'+i, err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("console %s:\n%s", l, tail(string(b)))
		}
		t.Fatalf("boot: %v", err)
	}
	t.Logf("boot to ready: a %v, b %v", guests[0].BootTime.Round(time.Millisecond), guests[1].BootTime.Round(time.Millisecond))
	return guests[0], guests[1]
}

// rcQP is one row of `rdma resource show qp`.
type rcQP struct {
	IfName string `json:"ifname"`
	LQPN   int    `json:"lqpn"`
	RQPN   int    `json:"rqpn"`
	Type   string `json:"type"`
	State  string `json:"state"`
	Comm   string `json:"comm"`
}

// pingpongQP finds ibv_rc_pingpong's RC QP on the link device in RTS.
func pingpongQP(ctx context.Context, g *Guest) (rcQP, bool) {
	r, err := g.Exec(ctx, 20*time.Second, "rdma", "-j", "resource", "show", "qp")
	if err != nil || r.ExitCode != 0 {
		return rcQP{}, false
	}
	var rows []rcQP
	json.Unmarshal([]byte(r.Stdout), &rows)
	for _, q := range rows {
		if q.IfName == LinkRxe && q.Comm == "ibv_rc_pingpong" && q.Type == "RC" && q.State == "RTS" {
			return q, true
		}
	}
	return rcQP{}, false
}

// linkCounters reads the link device's port counters (sent_pkts,
// rcvd_pkts, ...).
func linkCounters(t *testing.T, ctx context.Context, g *Guest) map[string]int64 {
	t.Helper()
	r, err := g.Exec(ctx, 20*time.Second, "rdma", "-j", "statistic", "show", "link", LinkRxe+"/1")
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("rdma statistic show link %s/1: %v %s", LinkRxe, err, r.Stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("rdma statistic: %v: %s", err, r.Stdout)
	}
	out := map[string]int64{}
	for k, v := range rows[0] {
		if f, ok := v.(float64); ok {
			out[k] = int64(f)
		}
	}
	if _, ok := out["sent_pkts"]; !ok {
		t.Fatalf("rdma statistic has no sent_pkts: %s", r.Stdout)
	}
	return out
}

// startSSHD runs sshd in guest b with generated keys and sets up guest a
// as its client (/etc/ssh/ssh_config, host "peer"); sshd runs until the
// test ends.
func startSSHD(t *testing.T, ctx context.Context, a, b *Guest) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"host", "client"} {
		out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rdmaprobe-"+k, "-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	peer := strings.Split(b.Ready.Link.Addr, "/")[0]
	hostPub := strings.Fields(string(read("host.pub")))
	sshdConfig := "ListenAddress " + peer + "\nHostKey /etc/ssh/host\nAuthorizedKeysFile /etc/ssh/authorized_keys\n" +
		"PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nPrintMotd no\nPrintLastLog no\n" +
		"MaxStartups 100\nMaxSessions 100\n"
	_, err := b.PutFiles(ctx, []File{
		{Path: "/run/sshd", Mode: os.ModeDir | 0o755},
		{Path: "/etc/ssh", Mode: os.ModeDir | 0o755},
		{Path: "/etc/ssh/host", Mode: 0o600, Data: read("host")},
		{Path: "/etc/ssh/authorized_keys", Mode: 0o644, Data: read("client.pub")},
		{Path: "/etc/ssh/sshd_config", Mode: 0o644, Data: []byte(sshdConfig)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sshConfig := fmt.Sprintf("Host peer\n  HostName %s\n  User root\n  IdentityFile /root/.ssh/id_ed25519\n"+
		"  UserKnownHostsFile /etc/ssh/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 10\n"+
		"  KexAlgorithms curve25519-sha256\n", peer)
	_, err = a.PutFiles(ctx, []File{
		{Path: "/root/.ssh", Mode: os.ModeDir | 0o700},
		{Path: "/root/.ssh/id_ed25519", Mode: 0o600, Data: read("client")},
		{Path: "/etc/ssh", Mode: os.ModeDir | 0o755},
		{Path: "/etc/ssh/known_hosts", Mode: 0o644, Data: []byte(peer + " " + hostPub[0] + " " + hostPub[1] + "\n")},
		{Path: "/etc/ssh/ssh_config", Mode: 0o644, Data: []byte(sshConfig)},
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	sshd := make(chan ExecResult, 1)
	go func() {
		// -D: sshd stays a child of the guest's init, which ends it when
		// the call is cancelled.
		r, _ := b.Exec(sctx, 0, "/usr/sbin/sshd", "-D", "-E", "/tmp/sshd.log", "-f", "/etc/ssh/sshd_config")
		sshd <- r
	}()
	t.Cleanup(func() {
		if t.Failed() {
			// dash's read loop: the guest has no cat.
			r, _ := b.Exec(ctx, 10*time.Second, "sh", "-c", `while IFS= read -r l; do echo "$l"; done </tmp/sshd.log`)
			t.Logf("sshd's log in guest b:\n%s", r.Stdout)
		}
		stop()
		<-sshd
	})
	waitGuest(t, ctx, "sshd to listen in guest b", func() bool {
		select {
		case r := <-sshd:
			t.Fatalf("sshd exited: %d %s %s", r.ExitCode, r.Error, r.Stderr)
		default:
		}
		raw, err := b.Call(ctx, OpListening, 22, nil)
		return err == nil && string(raw) == "true"
	})
}

// A link end already used is refused before Boot opens anything: no file
// descriptor is left behind by the refusal.
func TestBootRefusesUsedLink(t *testing.T) {
	if _, err := qemuBinary(""); err != nil {
		parts.Missing(t, "no QEMU: %v", err)
	}
	a, b, err := NewLink()
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	a.Close()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for range 3 {
		if _, err := boot(context.Background(), BootConfig{Image: Image{Kernel: "/nonexistent", Initrd: "/nonexistent"}, Link: a}); err == nil || !strings.Contains(err.Error(), "already used or closed") {
			t.Fatalf("boot with a closed link end: %v", err)
		}
	}
	if after := fds(); after != before {
		t.Errorf("%d file descriptors open after three refusals, %d before", after, before)
	}
}
