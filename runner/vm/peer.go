package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner/launch"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// Two guests, two hosts (GuestOptions.Peer): the run's guest and a peer
// guest joined by a virtual Ethernet link (softroce.NewLink), Soft-RoCE
// on the link in both (softroce.LinkRxe). The server and the runner are
// in the first; the load generators run in the peer, started over SSH
// from the first (the peer runs sshd from Debian's openssh-server, with
// keys made for the boot). So the QPs of a point are on both sides of a
// link, as between two hosts, and nothing of it leaves this machine: the
// link is a socketpair between the two QEMUs.

// peerHost is the peer's name in the first guest's ssh_config.
const peerHost = "peer"

// peerSSHConfig is the first guest's ssh_config for the peer.
const peerSSHConfig = "/etc/ssh/ssh_config"

// peerBinaries are what the guests need beyond the usual: sshd in the
// peer, ssh in the first, /bin/sh (by that path: sshd runs commands with
// the login shell) and uname (the launcher asks a host what it is).
var peerBinaries = []string{"/usr/sbin/sshd", "ssh", "/bin/sh", "uname"}

// PeerPlacement is what the first guest's runner needs to start
// generators in the peer (GuestPointRequest.Peer).
type PeerPlacement struct {
	Hosts []launch.Host `json:"hosts"`
	SSH   []string      `json:"ssh"`
}

// peerPackages names the Debian package to install for each of the
// peer's programs missing on this host, which the guests are built from.
func peerPackages() error {
	for _, p := range []struct{ bin, pkg string }{{"/usr/sbin/sshd", "openssh-server"}, {"ssh", "openssh-client"}} {
		if _, err := exec.LookPath(p.bin); err != nil {
			return fmt.Errorf("--vm-peer needs %s (Debian package %s) on this host: apt-get install %s", p.bin, p.pkg, p.pkg)
		}
	}
	return nil
}

// guestPeer is the booted peer and its sshd.
type guestPeer struct {
	g         *softroce.Guest
	stopSSHD  context.CancelFunc
	sshdDone  chan struct{}
	placement PeerPlacement
}

// bootPair boots the first guest and its peer on one link, in parallel,
// and starts the peer's sshd. On error nothing is left running.
//
// softroce.Boot starts again a guest whose boot stalls, but not a guest
// on a link, since a link end belongs to one QEMU: so when an attempt
// failed only because a boot stalled, bootPair closes both guests and
// boots the pair again on a new link, up to softroce.BootAttempts in
// all, as Boot does for one guest. The retries append to both console
// logs (BootConfig.Retry), after a line saying why, rather than start
// them afresh as a new Boot would: the stalled boot's console is what
// tells a kernel hang from a slow host, and the run's directory would
// otherwise keep only the last boot's.
func bootPair(ctx context.Context, img softroce.Image, cfg softroce.BootConfig, peerLog string) (*softroce.Guest, *guestPeer, error) {
	var stalls []string
	stalled := make([]int, 2)
	for attempt := 1; ; attempt++ {
		guests, onlyStalls, err := bootLinked(ctx, img, cfg, peerLog, stalled)
		if err == nil {
			a, b := guests[0], guests[1]
			a.Stalls, b.Stalls = stalled[0], stalled[1]
			p, err := startPeerSSH(ctx, a, b)
			if err != nil {
				a.Close()
				b.Close()
				return nil, nil, err
			}
			return a, p, nil
		}
		if !onlyStalls || ctx.Err() != nil || attempt == softroce.BootAttempts {
			return nil, nil, fmt.Errorf("boot two guests: %w", softroce.WrapStalls(err, stalls))
		}
		stalls = append(stalls, err.Error())
		cfg.Retry = err.Error() + "; starting both guests once more"
	}
}

// bootLinked is one attempt of bootPair: it boots the two guests on a
// new link and counts in stalled the boots of each that stalled. On
// error both guests are closed and reaped, and onlyStalls says whether
// every boot that failed stalled (softroce.ErrStalled).
func bootLinked(ctx context.Context, img softroce.Image, cfg softroce.BootConfig, peerLog string, stalled []int) (guests []*softroce.Guest, onlyStalls bool, err error) {
	ea, eb, err := softroce.NewLink()
	if err != nil {
		return nil, false, err
	}
	defer ea.Close()
	defer eb.Close()
	guests = make([]*softroce.Guest, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, end := range []*softroce.LinkEnd{ea, eb} {
		c := cfg
		c.Image, c.Link = img, end
		if i == 1 {
			c.LogPath = peerLog
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			guests[i], errs[i] = softroce.Boot(ctx, c)
		}()
	}
	wg.Wait()
	onlyStalls = true
	for i, err := range errs {
		if errors.Is(err, softroce.ErrStalled) {
			stalled[i]++
		} else if err != nil {
			onlyStalls = false
		}
	}
	switch {
	case errs[0] == nil && errs[1] == nil:
		return guests, false, nil
	case errs[1] == nil:
		err = fmt.Errorf("first guest: %w", errs[0])
	case errs[0] == nil:
		err = fmt.Errorf("peer guest: %w", errs[1])
	default:
		err = fmt.Errorf("first guest: %w; peer guest: %w", errs[0], errs[1])
	}
	for _, g := range guests {
		if g != nil {
			g.Close()
		}
	}
	return nil, onlyStalls, err
}

// startPeerSSH makes a host key for the peer and a client key for the
// first guest (ssh-keygen on this host), puts them and the configs in
// place, runs sshd in the peer and waits until it listens.
func startPeerSSH(ctx context.Context, a, b *softroce.Guest) (*guestPeer, error) {
	if a.Ready.Link == nil || b.Ready.Link == nil {
		return nil, fmt.Errorf("the guests came up without their link device")
	}
	dir, err := os.MkdirTemp("", "rdmaprobe-peer-keys-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, k := range []string{"host", "client"} {
		out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rdmaprobe-"+k,
			"-f", filepath.Join(dir, k)).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("ssh-keygen (install openssh-client): %v %s", err, out)
		}
	}
	read := func(name string) []byte {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return b
	}
	addr := strings.Split(b.Ready.Link.Addr, "/")[0]
	hostPub := strings.Fields(string(read("host.pub")))
	if len(hostPub) < 2 {
		return nil, fmt.Errorf("ssh-keygen wrote no public host key")
	}
	sshd := strings.Join([]string{"ListenAddress " + addr, "HostKey /etc/ssh/host", "AuthorizedKeysFile /etc/ssh/authorized_keys",
		"PermitRootLogin prohibit-password", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
		"PrintMotd no", "PrintLastLog no", "MaxStartups 100", "MaxSessions 100",
		// A dropped session ends within 30 s, and with it the stdin of
		// what it ran; a 6 s bound ended a live session once, when a
		// traffic phase over the link held the keepalive replies back.
		"ClientAliveInterval 5", "ClientAliveCountMax 6", ""}, "\n")
	if _, err := b.PutFiles(ctx, []softroce.File{
		{Path: "/run/sshd", Mode: fs.ModeDir | 0o755},
		{Path: "/etc/ssh", Mode: fs.ModeDir | 0o755},
		{Path: "/etc/ssh/host", Mode: 0o600, Data: read("host")},
		{Path: "/etc/ssh/authorized_keys", Mode: 0o644, Data: read("client.pub")},
		{Path: "/etc/ssh/sshd_config", Mode: 0o644, Data: []byte(sshd)},
	}); err != nil {
		return nil, fmt.Errorf("peer guest: %w", err)
	}
	client := fmt.Sprintf("Host %s\n  HostName %s\n  User root\n  IdentityFile /root/.ssh/id_ed25519\n"+
		"  UserKnownHostsFile /etc/ssh/known_hosts\n  StrictHostKeyChecking yes\n"+
		// The post-quantum exchange costs seconds of emulated CPU per
		// login; these keys live for one boot.
		"  KexAlgorithms curve25519-sha256\n", peerHost, addr)
	if _, err := a.PutFiles(ctx, []softroce.File{
		{Path: "/root/.ssh", Mode: fs.ModeDir | 0o700},
		{Path: "/root/.ssh/id_ed25519", Mode: 0o600, Data: read("client")},
		{Path: "/etc/ssh", Mode: fs.ModeDir | 0o755},
		{Path: "/etc/ssh/known_hosts", Mode: 0o644, Data: []byte(addr + " " + hostPub[0] + " " + hostPub[1] + "\n")},
		{Path: peerSSHConfig, Mode: 0o644, Data: []byte(client)},
	}); err != nil {
		return nil, fmt.Errorf("first guest: %w", err)
	}
	sctx, stop := context.WithCancel(context.Background())
	p := &guestPeer{g: b, stopSSHD: stop, sshdDone: make(chan struct{}),
		placement: PeerPlacement{Hosts: []launch.Host{{Name: peerHost, Slots: 1, Exe: "/init"}},
			SSH: []string{"ssh", "-F", peerSSHConfig}}}
	go func() {
		// -D: sshd stays a child of the peer's init, which ends it when
		// this call is cancelled.
		b.Exec(sctx, 0, "/usr/sbin/sshd", "-D", "-e", "-f", "/etc/ssh/sshd_config")
		close(p.sshdDone)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		raw, err := b.Call(ctx, softroce.OpListening, 22, nil)
		if err == nil && string(raw) == "true" {
			return p, nil
		}
		select {
		case <-p.sshdDone:
			return nil, fmt.Errorf("sshd in the peer guest exited")
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.close()
			return nil, fmt.Errorf("sshd in the peer guest is not listening after a minute")
		}
	}
}

// close stops the peer's sshd and powers the peer off.
func (p *guestPeer) close() error {
	p.stopSSHD()
	<-p.sshdDone
	return p.g.Close()
}

// hosts describes the peer for the run record, as the first guest's
// launcher found it.
func (g *Guest) hosts() []result.Host {
	if g.peer == nil {
		return nil
	}
	if g.peerHosts == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var hs []result.Host
		// Empty until the first point has prepared the launcher.
		if raw, err := g.g.Call(ctx, OpHosts, nil, nil); err == nil && json.Unmarshal(raw, &hs) == nil && len(hs) > 0 {
			g.peerHosts = hs
		}
	}
	return g.peerHosts
}
