package softroce

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/internal/parts"
)

// TestGuestCapserver builds the compiled-cap fixture (testdata/capserver)
// on the host for MAX_CLIENTS=3, pushes it into the shared guest, and runs
// it there on both devices: rxe0 at GID index 1 and rxe1 at GID index 0,
// what most RDMA examples open. Three clients connect and are held; the
// kernel shows the server's 3 QPs, 6 CQs and 6 MRs; a fourth client is
// refused with "at capacity"; all leave, and the server stops on SIGTERM.
func TestGuestCapserver(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		parts.Missing(t, "gcc not installed (scripts/setup.sh installs it)")
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		parts.Missing(t, "libibverbs-dev not installed (scripts/setup.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := filepath.Abs("../testdata/capserver")
	if err != nil {
		t.Fatal(err)
	}
	b := &command.Builder{
		Argv: []string{"make", "-s", "-C", src, "OUT={build}", "MAX_CLIENTS={n}"},
		Dir:  t.TempDir(),
	}
	built, err := b.Ensure(ctx, map[string]string{"n": "3"})
	if err != nil {
		t.Fatal(err)
	}
	g := sharedGuest(t)
	files, err := HostFiles([]string{built.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.PutFiles(ctx, files); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dev, gid, addr string
	}{{rxeDevice, "1", "127.0.0.1"}, {NetdevRxe, "0", NetdevAddr}} {
		t.Run(c.dev, func(t *testing.T) {
			var res capResult
			raw, err := g.Call(ctx, "capserver", capRequest{Dir: built.Dir, Device: c.dev, GID: c.gid, Addr: c.addr, N: 3}, nil)
			if err == nil {
				err = json.Unmarshal(raw, &res)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %+v", c.dev, res)
			if res.Connected != 3 {
				t.Errorf("%d of 3 clients connected: %v", res.Connected, res.Outcomes)
			}
			if r := res.Server; r["qp"] != 3 || r["cq"] != 6 || r["mr"] != 6 || r["pd"] != 1 || r["ctx"] != 1 {
				t.Errorf("server's objects while holding 3: %v, want 3 QPs, 6 CQs, 6 MRs, 1 PD, 1 context", r)
			}
			if res.FDs != 8+3 {
				t.Errorf("server has %d open files holding 3 clients, want 8 + 3 (testdata/capserver/capserver.c)", res.FDs)
			}
			if res.Extra.Class != command.ExitStatus || res.Extra.ExitCode != 3 || !strings.Contains(res.Extra.Tail, "at capacity (MAX_CLIENTS=3)") {
				t.Errorf("client 4: %+v, want exit 3 saying at capacity", res.Extra)
			}
			for i, o := range res.Outcomes {
				if o.Class != command.OK {
					t.Errorf("client %d: %+v", i, o)
				}
			}
			if res.Stop.Killed || res.Stop.Exit.Code != 0 || !strings.Contains(res.ServerTail, "stopped holding 0: served 3, refused 1") {
				t.Errorf("server stop %+v, output %q", res.Stop, res.ServerTail)
			}
		})
	}
	// A wall placed on purpose: with RLIMIT_NOFILE = 8 + 2 the server
	// holds exactly 2 clients, and the third is told why (EMFILE).
	t.Run("nofile", func(t *testing.T) {
		var res capResult
		raw, err := g.Call(ctx, "capserver", capRequest{Dir: built.Dir, Device: NetdevRxe, GID: "0", Addr: NetdevAddr, N: 2,
			Prefix: []string{"prlimit", "--nofile=10:10"}}, nil)
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.Connected != 2 || res.FDs != 10 {
			t.Errorf("%d connected with %d open files, want 2 and 10", res.Connected, res.FDs)
		}
		if res.Extra.Class != command.ExitStatus || res.Extra.ExitCode != 4 || res.Extra.Errno != "EMFILE" {
			t.Errorf("client 3: %+v, want exit 4 naming EMFILE", res.Extra)
		}
	})
}

type capRequest struct {
	Dir, Device, GID, Addr string
	N                      int
	Prefix                 []string // runs the server under, e.g. prlimit
}

type capResult struct {
	Connected  int
	Outcomes   []command.Outcome
	Extra      command.Outcome
	Server     map[string]int
	FDs        int
	Stop       command.StopReport
	ServerTail string
}

// runCapserver is the guest's half of TestGuestCapserver.
func runCapserver(ctx context.Context, req capRequest) (capResult, error) {
	var res capResult
	const port = 4433
	argv := append(req.Prefix, req.Dir+"/capserver", "-d", req.Device, "-g", req.GID, "-p", strconv.Itoa(port))
	srv, err := command.Start(command.Spec{Argv: argv})
	if err != nil {
		return res, err
	}
	defer srv.Stop(0)
	if err := command.WaitReady(ctx, srv, command.Readiness{Port: port, Timeout: time.Minute}); err != nil {
		return res, err
	}
	client := func() (*command.Proc, error) {
		return command.Start(command.Spec{
			Argv:  []string{req.Dir + "/capclient", "-a", req.Addr, "-p", strconv.Itoa(port), "-d", req.Device, "-g", req.GID},
			Stdin: "send Test\n", Hold: true, Match: regexp.MustCompile(`^connected qpn \d+`),
		})
	}
	var procs []*command.Proc
	defer func() {
		for _, p := range procs {
			p.Stop(0)
		}
	}()
	for range req.N {
		p, err := client()
		if err != nil {
			return res, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		select {
		case <-p.Matched():
			res.Connected++
		case <-p.Done():
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	if res.Server, err = collectors.TreeResources(ctx, req.Device, srv.Tree()); err != nil {
		return res, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", srv.PID))
	if err != nil {
		return res, err
	}
	res.FDs = len(fds)
	extra, err := client()
	if err != nil {
		return res, err
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, werr := extra.Wait(dctx)
	cancel()
	res.Extra = command.Classify(extra, werr, true)
	for _, p := range procs {
		p.CloseStdin()
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, werr := p.Wait(dctx)
		cancel()
		res.Outcomes = append(res.Outcomes, command.Classify(p, werr, true))
	}
	res.Stop = srv.Stop(10 * time.Second)
	res.ServerTail = srv.Tail()
	return res, nil
}
