// Package soak runs `rdmaprobe serve` for a long time while waves of
// clients connect, exchange messages and leave, and samples the server
// process at intervals: what `rdmaprobe bench soak` prints. A server
// meant to run for days must keep nothing per client served; the slope
// of its memory against the clients it has served says whether it does.
// The figures are measurements, not a verdict.
package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/collectors"
	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/server"
)

// Config is one soak.
type Config struct {
	Duration   time.Duration `json:"duration"`
	Interval   time.Duration `json:"interval"`    // between samples of the server
	Wave       int           `json:"wave"`        // clients per wave
	Traffic    time.Duration `json:"traffic"`     // each wave's traffic phase before it leaves
	MaxClients int           `json:"max_clients"` // the server's --max-clients
	Mode       string        `json:"mode"`
	MsgSize    int           `json:"msg_size"`
	InFlight   int           `json:"inflight"` // connection attempts in progress at once
	// Exe is the rdmaprobe binary run as `serve`, and ServeArgs its
	// fabric flags (--backend sim, or verbs with its device).
	Exe       string   `json:"-"`
	ServeArgs []string `json:"serve_args"`
	// Device is the clients' device (the soak process's).
	Device fabric.DeviceConfig `json:"-"`
	// Prepare, if set, adjusts the server's command before it starts
	// (the runner's: killed if this process dies).
	Prepare func(*exec.Cmd) `json:"-"`
}

// Sample is the server process at the end of an interval, and what the
// waves did during it.
type Sample struct {
	ElapsedSec        float64 `json:"elapsed_sec"`
	Served            int     `json:"served"` // clients connected since the start
	RSSBytes          uint64  `json:"rss_bytes"`
	RetainedHeapBytes uint64  `json:"retained_heap_bytes"`
	OpenFiles         int     `json:"open_files"`
	Threads           int     `json:"threads"`
	Mappings          int     `json:"mappings"`
	Goroutines        int     `json:"goroutines"`
	ConnectsPerSec    float64 `json:"connects_per_sec"`
	Failures          int     `json:"failures"` // client outcomes other than ok in the interval
	Messages          int64   `json:"messages"` // verified round trips of the traffic phases in the interval
}

// Result is a whole soak: its samples and the growth they show.
type Result struct {
	Config  Config   `json:"config"`
	Samples []Sample `json:"samples"`
	// Growth per 100,000 clients served: the least-squares slope of RSS
	// and of the retained heap against clients served, over the samples
	// after the first (the first holds the process's warm-up).
	RSSPer100k  float64             `json:"rss_bytes_per_100k_clients"`
	HeapPer100k float64             `json:"retained_heap_bytes_per_100k_clients"`
	Served      int                 `json:"served"`
	Failures    int                 `json:"failures"`
	Server      *result.ServerStats `json:"server,omitempty"`
}

// Check refuses a soak that could not run, before anything starts.
func (c Config) Check() error {
	if c.Wave < 1 || c.MaxClients < c.Wave {
		return fmt.Errorf("--wave %d: want at least 1 and at most --max-clients (%d)", c.Wave, c.MaxClients)
	}
	if c.Duration <= 0 || c.Interval <= 0 {
		return errors.New("--soak-duration and --interval must be positive")
	}
	if err := server.ValidMode(c.Mode); err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	if c.Mode == server.ModeMux {
		return fmt.Errorf("--mode %s: the soak's clients have a QP each, which a server of logical clients refuses", server.ModeMux)
	}
	return nil
}

// Run starts the server, runs waves until cfg.Duration has passed (or
// ctx ends), and stops the server. sample is called after each interval.
func Run(ctx context.Context, p fabric.Provider, cfg Config, sample func(Sample)) (*Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rdmaprobe-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(ctx, cfg, dir)
	if err != nil {
		return nil, err
	}
	defer srv.stop()

	ca, err := os.ReadFile(filepath.Join(dir, "server.pem"))
	if err != nil {
		return nil, err
	}
	var pair certs.Pair
	if pair.CertPEM, err = os.ReadFile(filepath.Join(dir, "client.pem")); err != nil {
		return nil, err
	}
	if pair.KeyPEM, err = os.ReadFile(filepath.Join(dir, "client.key")); err != nil {
		return nil, err
	}
	tlsConf, err := certs.Pinned(ca, pair)
	if err != nil {
		return nil, err
	}
	dev, err := p.Open(ctx, cfg.Device)
	if err != nil {
		return nil, fmt.Errorf("open the clients' device: %w", err)
	}
	defer dev.Close()
	d, err := client.NewDialer(dev, client.Config{Addr: srv.addr, TLS: tlsConf, Rounds: 1, MsgSize: cfg.MsgSize,
		Timeout: 60 * time.Second, UD: cfg.Mode == server.ModeUD})
	if err != nil {
		return nil, err
	}
	defer d.Close()

	res := &Result{Config: cfg}
	start := time.Now()
	next := start.Add(cfg.Interval)
	var cur Sample
	for ctx.Err() == nil && time.Since(start) < cfg.Duration {
		if err := srv.exited(); err != nil {
			return res, err
		}
		recs, conns, _ := client.Run(ctx, d, client.Load{N: cfg.Wave, InFlight: cfg.InFlight}, nil)
		var ok []*client.Conn
		for i, r := range recs {
			if r.Outcome == result.OutcomeOK {
				cur.Served++
				ok = append(ok, conns[i])
			} else {
				cur.Failures++
			}
		}
		if cfg.Traffic > 0 && len(ok) > 0 {
			tr := d.Traffic(ctx, ok, client.TrafficConfig{Duration: cfg.Traffic})
			cur.Messages += tr.Messages
		}
		client.CloseAll(conns)
		if now := time.Now(); !now.Before(next) {
			if err := srv.measure(&cur, now.Sub(start), cfg.Interval); err != nil {
				return res, err
			}
			cur.Served += lastServed(res)
			res.Samples = append(res.Samples, cur)
			res.Failures += cur.Failures
			sample(cur)
			cur = Sample{}
			next = now.Add(cfg.Interval)
		}
	}
	res.Served = lastServed(res) + cur.Served
	res.Failures += cur.Failures
	res.RSSPer100k, res.HeapPer100k = growth(res.Samples)
	st, err := srv.stop()
	res.Server = st
	if err != nil {
		return res, err
	}
	return res, ctx.Err()
}

func lastServed(r *Result) int {
	if len(r.Samples) == 0 {
		return 0
	}
	return r.Samples[len(r.Samples)-1].Served
}

// growth is the slope of RSS and retained heap against clients served,
// per 100,000, leaving out the first sample.
func growth(s []Sample) (rss, heap float64) {
	if len(s) < 3 {
		return 0, 0
	}
	s = s[1:]
	slope := func(y func(Sample) float64) float64 {
		var mx, my float64
		for _, v := range s {
			mx += float64(v.Served)
			my += y(v)
		}
		mx, my = mx/float64(len(s)), my/float64(len(s))
		var num, den float64
		for _, v := range s {
			dx := float64(v.Served) - mx
			num += dx * (y(v) - my)
			den += dx * dx
		}
		if den == 0 {
			return 0
		}
		return num / den * 100_000
	}
	return slope(func(v Sample) float64 { return float64(v.RSSBytes) }),
		slope(func(v Sample) float64 { return float64(v.RetainedHeapBytes) })
}

// serverProc is the `serve` process under soak.
type serverProc struct {
	cmd   *exec.Cmd
	addr  string // the TLS listener
	debug string // the /debug/memory URL
	done  chan error
	// stderr is the file of its standard error.
	stderr string
	prev   time.Time
	// stats is the server's last /debug/memory answer.
	stats *result.ServerStats
	// ended: the process was reaped, with exit.
	ended bool
	exit  error
}

func startServer(ctx context.Context, cfg Config, dir string) (*serverProc, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--max-clients", strconv.Itoa(cfg.MaxClients),
		"--mode", cfg.Mode, "--msg-size", strconv.Itoa(cfg.MsgSize), "--debug-addr", "127.0.0.1:0",
		"--cert-out", filepath.Join(dir, "server.pem"),
		"--client-cert-out", filepath.Join(dir, "client.pem"), "--client-key-out", filepath.Join(dir, "client.key")}
	cmd := exec.Command(cfg.Exe, append(args, cfg.ServeArgs...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// The server's stderr goes to a file in dir, read only to say why it
	// failed.
	errOut, err := os.Create(filepath.Join(dir, "serve.stderr"))
	if err != nil {
		return nil, err
	}
	defer errOut.Close()
	cmd.Stderr = errOut
	if cfg.Prepare != nil {
		cfg.Prepare(cmd)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start serve: %w", err)
	}
	s := &serverProc{cmd: cmd, done: make(chan error, 1), stderr: errOut.Name(), prev: time.Now()}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
		s.done <- cmd.Wait()
	}()
	// The ready and debug lines come first; the rest of stdout (the
	// stopped line) is drained by the reader above.
	ready := time.NewTimer(time.Minute)
	defer ready.Stop()
	for s.addr == "" || s.debug == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				err := <-s.done
				s.ended = true
				return nil, fmt.Errorf("serve exited before it was ready (%v): %s", err, s.errText())
			}
			if a, ok := strings.CutPrefix(line, "ready: listening on "); ok {
				s.addr, _, _ = strings.Cut(a, ",")
			}
			if a, ok := strings.CutPrefix(line, "debug: http://"); ok {
				u, _, _ := strings.Cut(a, " ")
				s.debug = "http://" + u
			}
		case <-ready.C:
			s.kill()
			return nil, errors.New("serve was not ready within a minute")
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		}
	}
	go func() {
		for range lines {
		}
	}()
	return s, nil
}

// exited is the server's exit, if it has exited.
func (s *serverProc) exited() error {
	select {
	case err := <-s.done:
		s.exit, s.ended = err, true
		return fmt.Errorf("serve exited during the soak (%v): %s", err, s.errText())
	default:
		return nil
	}
}

// measure fills the server's figures into cur.
func (s *serverProc) measure(cur *Sample, elapsed, interval time.Duration) error {
	resp, err := http.Get(s.debug)
	if err != nil {
		return fmt.Errorf("read the server's memory: %w", err)
	}
	defer resp.Body.Close()
	var m struct {
		RetainedHeapBytes uint64             `json:"retained_heap_bytes"`
		Goroutines        int                `json:"goroutines"`
		Server            result.ServerStats `json:"server"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return fmt.Errorf("read the server's memory: %w", err)
	}
	s.stats = &m.Server
	ps, err := collectors.Process(s.cmd.Process.Pid)
	if err != nil {
		return err
	}
	now := time.Now()
	cur.ElapsedSec = elapsed.Seconds()
	cur.RetainedHeapBytes, cur.Goroutines = m.RetainedHeapBytes, m.Goroutines
	cur.RSSBytes, cur.OpenFiles, cur.Threads = ps.RSS, ps.FDs, ps.Threads
	cur.Mappings = ps.Maps
	cur.ConnectsPerSec = float64(cur.Served) / now.Sub(s.prev).Seconds()
	s.prev = now
	return nil
}

func (s *serverProc) kill() {
	s.cmd.Process.Kill()
	s.exit = <-s.done
	s.ended = true
}

// stop ends the server with SIGTERM (SIGKILL after 30 s) and returns its
// last counters; it may be called again.
func (s *serverProc) stop() (*result.ServerStats, error) {
	if s.ended {
		return s.stats, nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.exit, s.ended = err, true
		if err != nil {
			return s.stats, fmt.Errorf("serve: %v: %s", err, s.errText())
		}
	case <-time.After(30 * time.Second):
		s.kill()
		return s.stats, errors.New("serve did not stop within 30 s of SIGTERM; killed")
	}
	return s.stats, nil
}

// errText is what the server wrote to its standard error.
func (s *serverProc) errText() string {
	b, _ := os.ReadFile(s.stderr)
	return strings.TrimSpace(string(b))
}
