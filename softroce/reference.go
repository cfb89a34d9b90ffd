package softroce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// referencePort is ibv_rc_pingpong's default TCP port, named explicitly so
// the readiness check watches the right one.
const referencePort = 18515

// Pair is where a reference tool's two sides run: both in one guest on
// its loopback device (Local), or the server in one guest and the client
// in another across their link (AcrossLink), as rdmaprobe's server and
// clients of a --vm-peer run are.
type Pair struct {
	Server, Client *Guest
	// Device is the verbs device on both sides, ServerGID and ClientGID
	// each side's GID index on it.
	Device               string
	ServerGID, ClientGID int
	// Addr is the server's address as the client dials it.
	Addr string
	// Iterations, if set, is every tool's count (-n) in place of its own.
	Iterations int
	// Where names the place in a sentence, for the run's record.
	Where string
}

// Local is both sides in g on rxe0 over its loopback.
func Local(g *Guest) Pair {
	return Pair{Server: g, Client: g, Device: rxeDevice, ServerGID: rxeGIDIndex, ClientGID: rxeGIDIndex,
		Addr: "127.0.0.1", Where: "in one guest, " + rxeDevice + " over its loopback"}
}

// AcrossLink is the server in server and the client in client, on
// LinkRxe with each side's IPv4-mapped GID: the device and GIDs the
// clients of a --vm-peer run use.
func AcrossLink(server, client *Guest) (Pair, error) {
	s, c := server.Ready.Link, client.Ready.Link
	if s == nil || c == nil || s.GIDIndex < 0 || c.GIDIndex < 0 {
		return Pair{}, fmt.Errorf("the guests have no link device with a GID")
	}
	addr := strings.Split(s.Addr, "/")[0]
	// A round trip across the link costs milliseconds under TCG (two
	// emulated kernels and the host's socketpair): 300 keep each tool to
	// a few seconds.
	return Pair{Server: server, Client: client, Device: LinkRxe, ServerGID: s.GIDIndex, ClientGID: c.GIDIndex, Addr: addr, Iterations: 300,
		Where: fmt.Sprintf("across the link: client in the generators' guest (%s), server in the server's guest (%s), %s",
			strings.Split(c.Addr, "/")[0], addr, LinkRxe)}, nil
}

// Reference runs ibv_rc_pingpong (RC, 4 KiB messages, 1000 iterations)
// on p and returns the client's figures: an independent, rdma-core-made
// yardstick for the verbs costs rdmaprobe measures in the same place.
func Reference(ctx context.Context, p Pair) PerftestResult {
	return runPair(ctx, p, "ibv_rc_pingpong", "-g", referencePort,
		[]string{"-s", "4096", "-n", "1000"}, ParsePingpong)
}

// ReferenceLatency runs perftest's ib_write_lat (RC RDMA WRITE, 2-byte
// messages, 1000 iterations) on p and returns its latency row: t_min,
// t_max, t_typical, t_avg, t_stdev, p99, p99.9 (µs).
//
// perftest times with the CPU's cycle counter, calibrated against the
// clock at start; under TCG that calibration now and then yields zero and
// the row reads inf/nan (ErrPerftestClock). Such a run is repeated, up to
// three attempts in all.
func ReferenceLatency(ctx context.Context, p Pair) PerftestResult {
	return perftest(ctx, p, "ib_write_lat", referencePort+1)
}

// ErrPerftestClock: perftest printed inf or nan, or a bandwidth of zero
// after its iterations ran, its cycle counter uncalibrated (under TCG its
// clock estimate can fail: "Correlation coefficient r^2 ... < 0.9").
var ErrPerftestClock = errors.New("perftest printed inf/nan or a zero rate: its cycle-counter calibration failed")

// DataPathTools are perftest's latency and bandwidth tools for an
// operation of the traffic phase: "send" (also ""), "write", "read".
func DataPathTools(op string) (lat, bw string) {
	switch op {
	case "write", "read":
		return "ib_" + op + "_lat", "ib_" + op + "_bw"
	}
	return "ib_send_lat", "ib_send_bw"
}

// DataPathReference runs perftest's latency and bandwidth tools for op
// (DataPathTools) with size-byte messages on p, over transport: the
// yardsticks of the traffic phase's latency (t_typical, p99) and message
// rate (MsgRate, in Mpps, and msg/s) at the run's operation and message
// size. transport is perftest's connection type, "" for its default
// (RC) or "UD" (-c UD: the datagrams of ud mode, sends only). A run
// whose cycle counter came out uncalibrated (ErrPerftestClock) is
// repeated, up to three attempts.
func DataPathReference(ctx context.Context, p Pair, op string, size int, transport string) []PerftestResult {
	lat, bw := DataPathTools(op)
	// perftest's default of 1000 iterations takes well under a second of
	// rxe in the guest; more give a steadier rate.
	return []PerftestResult{
		perftest(ctx, p, lat, referencePort+2, connection(transport, "-s", strconv.Itoa(size))...),
		perftest(ctx, p, bw, referencePort+3, connection(transport, "-s", strconv.Itoa(size), "-n", "5000")...),
	}
}

// DataPathLatency runs DataPathReference's latency tool alone: the
// reading a 1-client point takes just before its clients run, so that
// its latency is set against perftest's in turns rather than against
// readings minutes away on a host whose speed drifts.
func DataPathLatency(ctx context.Context, p Pair, op string, size int, transport string) PerftestResult {
	lat, _ := DataPathTools(op)
	return perftest(ctx, p, lat, referencePort+2, connection(transport, "-s", strconv.Itoa(size))...)
}

// connection is args after perftest's -c for transport, when it is not
// perftest's default.
func connection(transport string, args ...string) []string {
	if transport == "" {
		return args
	}
	return append([]string{"-c", transport}, args...)
}

// perftest runs a perftest tool on p, up to three times while its cycle
// counter comes out uncalibrated (ErrPerftestClock), and adds msg/s to
// a bandwidth tool's figures.
func perftest(ctx context.Context, p Pair, tool string, port int, extra ...string) PerftestResult {
	// -F: rxe's CPU frequency warning is no error here.
	extra = append([]string{"-F"}, extra...)
	var r PerftestResult
	for range 3 {
		r = runPair(ctx, p, tool, "-x", port, extra, ParsePerftest)
		if !errors.Is(r.Err, ErrPerftestClock) {
			break
		}
	}
	if r.Err == nil && r.Figures["MsgRate"] > 0 {
		r.Figures["msg/s"] = r.Figures["MsgRate"] * 1e6
	}
	return r
}

// PerftestResult is one run of a reference tool (perftest or
// ibv_rc_pingpong) and where it ran (Pair.Where).
type PerftestResult struct {
	Tool, Command, Where string
	Figures              map[string]float64
	Output               string
	Err                  error
}

// runPair runs tool's server and client on p, each with the device, its
// side's GID index (given by gidFlag: -g for ibv_rc_pingpong, -x for
// perftest), TCP port and extra, and parses the client's output: in one
// guest by exec-pair, across two by running the server, waiting until it
// listens and then running the client.
func runPair(ctx context.Context, p Pair, tool, gidFlag string, port int, extra []string, parse func(string) (map[string]float64, error)) PerftestResult {
	if p.Iterations > 0 {
		extra = withIterations(extra, p.Iterations)
	}
	argv := func(gid int) []string {
		return append([]string{tool, "-d", p.Device, gidFlag, strconv.Itoa(gid), "-p", strconv.Itoa(port)}, extra...)
	}
	server, client := argv(p.ServerGID), append(argv(p.ClientGID), p.Addr)
	r := PerftestResult{Tool: tool, Command: strings.Join(client, " "), Where: p.Where}
	timeout := time.Minute
	var res ExecPairResult
	if p.Server == p.Client {
		raw, err := p.Server.Call(ctx, OpExecPair, ExecPairRequest{
			Server: ExecRequest{Argv: server, TimeoutMS: timeout.Milliseconds()},
			Client: ExecRequest{Argv: client, TimeoutMS: timeout.Milliseconds()},
			Port:   port,
		}, nil)
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			r.Err = fmt.Errorf("%s: %w", tool, err)
			return r
		}
	} else {
		var err error
		res, err = execAcross(ctx, p, server, client, port, timeout)
		if err != nil {
			r.Err = fmt.Errorf("%s: %w", tool, err)
			return r
		}
	}
	r.Output = res.Client.Stdout + res.Client.Stderr
	if res.Client.ExitCode != 0 || res.Server.ExitCode != 0 {
		r.Err = fmt.Errorf("%s: client exit %d (%s), server exit %d (%s)", tool,
			res.Client.ExitCode, firstLine(res.Client.Stderr+res.Client.Error),
			res.Server.ExitCode, firstLine(res.Server.Stderr+res.Server.Error))
		return r
	}
	r.Figures, r.Err = parse(r.Output)
	return r
}

// withIterations sets -n to n in a tool's arguments.
func withIterations(args []string, n int) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "-n" {
			out[i+1] = strconv.Itoa(n)
			return out
		}
	}
	return append(out, "-n", strconv.Itoa(n))
}

// execAcross runs server in p.Server, waits until it listens on port,
// then runs client in p.Client; the server ends when its client has.
func execAcross(ctx context.Context, p Pair, server, client []string, port int, timeout time.Duration) (ExecPairResult, error) {
	var res ExecPairResult
	type done struct {
		r   ExecResult
		err error
	}
	served := make(chan done, 1)
	go func() {
		r, err := p.Server.Exec(ctx, timeout, server...)
		served <- done{r, err}
	}()
	deadline := time.Now().Add(timeout)
	for {
		raw, err := p.Server.Call(ctx, OpListening, port, nil)
		if err == nil && string(raw) == "true" {
			break
		}
		select {
		case d := <-served:
			if d.err != nil {
				return res, fmt.Errorf("server: %w", d.err)
			}
			res.Server = d.r
			return res, fmt.Errorf("server exited %d before it listened on port %d: %s", d.r.ExitCode, port, firstLine(d.r.Stderr+d.r.Error))
		default:
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			<-served // its timeout ends it
			return res, fmt.Errorf("server not listening on port %d after %v", port, timeout)
		}
	}
	c, cerr := p.Client.Exec(ctx, timeout, client...)
	s := <-served
	if cerr != nil {
		return res, fmt.Errorf("client: %w", cerr)
	}
	if s.err != nil {
		return res, fmt.Errorf("server: %w", s.err)
	}
	res.Server, res.Client = s.r, c
	return res, nil
}

// ParsePerftestLat reads the result row of a perftest latency tool
// (ParsePerftest).
func ParsePerftestLat(out string) (map[string]float64, error) { return ParsePerftest(out) }

// ParsePerftest reads the result row of a perftest tool, latency or
// bandwidth, naming figures after its header without their units
// ("t_typical", "99%", "99.9%" in µs; "BW average" in MB/s, "MsgRate" in
// Mpps; "bytes", "iterations"). A column name may hold spaces ("BW
// peak[MB/sec]", "99% percentile[usec]"), so the header is split after
// each unit; the leading "#bytes #iterations" are separate columns. A
// value of inf or nan, or a bandwidth row of zeros, is ErrPerftestClock.
func ParsePerftest(out string) (map[string]float64, error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "#bytes") || i+1 >= len(lines) {
			continue
		}
		var names []string
		for _, h := range strings.SplitAfter(l, "]") {
			h = strings.TrimSpace(h)
			if h == "" {
				continue
			}
			if k := strings.LastIndexByte(h, '['); k >= 0 && strings.HasSuffix(h, "]") {
				h = strings.TrimSpace(h[:k]) // the unit
			}
			f := strings.Fields(h)
			for len(f) > 0 && strings.HasPrefix(f[0], "#") {
				names, f = append(names, f[0]), f[1:]
			}
			if len(f) > 0 {
				n := strings.Join(f, " ")
				names = append(names, strings.ReplaceAll(strings.TrimSuffix(n, " percentile"), "% ", "%"))
			}
		}
		vals := strings.Fields(lines[i+1])
		if len(vals) != len(names) {
			return nil, fmt.Errorf("perftest row has %d values for %d columns", len(vals), len(names))
		}
		figs := map[string]float64{}
		for j, n := range names {
			v, err := strconv.ParseFloat(strings.TrimPrefix(vals[j], "-"), 64)
			if err != nil {
				return nil, fmt.Errorf("perftest column %s: %w", n, err)
			}
			if math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("perftest column %s is %s: %w", n, vals[j], ErrPerftestClock)
			}
			figs[strings.TrimPrefix(n, "#")] = v
		}
		if bw, ok := figs["BW average"]; ok && bw == 0 && figs["MsgRate"] == 0 && figs["iterations"] > 0 {
			return nil, fmt.Errorf("perftest read 0 MB/s over %v iterations: %w", figs["iterations"], ErrPerftestClock)
		}
		return figs, nil
	}
	return nil, fmt.Errorf("perftest output has no result table: %q", firstLine(out))
}

var (
	pingpongBytes = regexp.MustCompile(`(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec`)
	pingpongIters = regexp.MustCompile(`(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter`)
)

// ParsePingpong reads the two summary lines of ibv_rc_pingpong (and its
// ud/srq siblings).
func ParsePingpong(out string) (map[string]float64, error) {
	b := pingpongBytes.FindStringSubmatch(out)
	it := pingpongIters.FindStringSubmatch(out)
	if b == nil || it == nil {
		return nil, fmt.Errorf("ibv_rc_pingpong output has no rate lines: %q", firstLine(out))
	}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	return map[string]float64{
		"bytes":     f(b[1]),
		"seconds":   f(b[2]),
		"Mbit/sec":  f(b[3]),
		"iters":     f(it[1]),
		"usec/iter": f(it[3]),
	}, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
