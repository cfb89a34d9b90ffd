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
// the readiness check in exec-pair watches the right one.
const referencePort = 18515

// Reference runs ibv_rc_pingpong (RC, 4 KiB messages, 1000 iterations) on
// rxe0 with GID index 1 inside the guest, server and client both, and
// returns the client's figures: an independent, rdma-core-made yardstick
// for the verbs costs rdmaprobe measures in the same guest.
func Reference(ctx context.Context, g *Guest) (tool, command string, figures map[string]float64, output string, err error) {
	tool = "ibv_rc_pingpong"
	common := []string{"ibv_rc_pingpong", "-d", rxeDevice, "-g", strconv.Itoa(rxeGIDIndex), "-p", strconv.Itoa(referencePort), "-s", "4096", "-n", "1000"}
	server := append([]string(nil), common...)
	client := append(append([]string(nil), common...), "127.0.0.1")
	command = strings.Join(client, " ")
	timeout := (60 * time.Second).Milliseconds()
	raw, err := g.Call(ctx, OpExecPair, ExecPairRequest{
		Server: ExecRequest{Argv: server, TimeoutMS: timeout},
		Client: ExecRequest{Argv: client, TimeoutMS: timeout},
		Port:   referencePort,
	}, nil)
	if err != nil {
		return tool, command, nil, "", err
	}
	var res ExecPairResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return tool, command, nil, "", fmt.Errorf("%s: decode result: %w", tool, err)
	}
	output = res.Client.Stdout + res.Client.Stderr
	if res.Client.ExitCode != 0 || res.Server.ExitCode != 0 {
		return tool, command, nil, output, fmt.Errorf("%s: client exit %d (%s), server exit %d (%s)", tool,
			res.Client.ExitCode, firstLine(res.Client.Stderr+res.Client.Error),
			res.Server.ExitCode, firstLine(res.Server.Stderr+res.Server.Error))
	}
	figures, err = ParsePingpong(output)
	return tool, command, figures, output, err
}

// ReferenceLatency runs perftest's ib_write_lat (RC RDMA WRITE, 2-byte
// messages, 1000 iterations) the same way and returns its latency row:
// t_min, t_max, t_typical, t_avg, t_stdev, p99, p99.9 (µs).
//
// perftest times with the CPU's cycle counter, calibrated against the
// clock at start; under TCG that calibration now and then yields zero and
// the row reads inf/nan (ErrPerftestClock). Such a run is repeated, up to
// three attempts in all.
func ReferenceLatency(ctx context.Context, g *Guest) (tool, command string, figures map[string]float64, output string, err error) {
	for range 3 {
		tool, command, figures, output, err = referenceLatencyOnce(ctx, g)
		if !errors.Is(err, ErrPerftestClock) {
			break
		}
	}
	return tool, command, figures, output, err
}

// ErrPerftestClock: perftest printed inf or nan, its cycle counter
// uncalibrated.
var ErrPerftestClock = errors.New("perftest printed inf/nan: its cycle-counter calibration failed")

func referenceLatencyOnce(ctx context.Context, g *Guest) (tool, command string, figures map[string]float64, output string, err error) {
	return perftestOnce(ctx, g, "ib_write_lat", referencePort+1, nil)
}

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
// (DataPathTools) with size-byte messages on rxe0 in the guest, server
// and client both: the yardsticks of the traffic phase's latency
// (t_typical, p99) and message rate (MsgRate, in Mpps, and msg/s) at
// the run's operation and message size. A run whose cycle counter came
// out uncalibrated (ErrPerftestClock) is repeated, up to three attempts.
func DataPathReference(ctx context.Context, g *Guest, op string, size int) []PerftestResult {
	lat, bw := DataPathTools(op)
	// perftest's default of 1000 iterations takes well under a second of
	// rxe in the guest; more give a steadier rate.
	return []PerftestResult{
		perftest(ctx, g, lat, referencePort+2, "-s", strconv.Itoa(size)),
		perftest(ctx, g, bw, referencePort+3, "-s", strconv.Itoa(size), "-n", "5000"),
	}
}

// DataPathLatency runs DataPathReference's latency tool alone: the
// reading a 1-client point takes just before its clients run, so that
// its latency is set against perftest's in turns rather than against
// readings minutes away on a host whose speed drifts.
func DataPathLatency(ctx context.Context, g *Guest, op string, size int) PerftestResult {
	lat, _ := DataPathTools(op)
	return perftest(ctx, g, lat, referencePort+2, "-s", strconv.Itoa(size))
}

// perftest runs tool (perftestOnce) up to three times while its cycle
// counter comes out uncalibrated (ErrPerftestClock).
func perftest(ctx context.Context, g *Guest, tool string, port int, extra ...string) PerftestResult {
	var r PerftestResult
	for range 3 {
		r.Tool, r.Command, r.Figures, r.Output, r.Err = perftestOnce(ctx, g, tool, port, extra)
		if !errors.Is(r.Err, ErrPerftestClock) {
			break
		}
	}
	return r
}

// PerftestResult is one perftest run.
type PerftestResult struct {
	Tool, Command string
	Figures       map[string]float64
	Output        string
	Err           error
}

// perftestOnce runs one perftest tool as server and client on rxe0 with
// GID index 1 and parses the client's result row.
func perftestOnce(ctx context.Context, g *Guest, tool string, port int, extra []string) (_, command string, figures map[string]float64, output string, err error) {
	common := append([]string{tool, "-d", rxeDevice, "-x", strconv.Itoa(rxeGIDIndex), "-F", "-p", strconv.Itoa(port)}, extra...)
	client := append(append([]string(nil), common...), "127.0.0.1")
	command = strings.Join(client, " ")
	timeout := (60 * time.Second).Milliseconds()
	raw, err := g.Call(ctx, OpExecPair, ExecPairRequest{
		Server: ExecRequest{Argv: common, TimeoutMS: timeout},
		Client: ExecRequest{Argv: client, TimeoutMS: timeout},
		Port:   port,
	}, nil)
	if err != nil {
		return tool, command, nil, "", err
	}
	var res ExecPairResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return tool, command, nil, "", fmt.Errorf("%s: decode result: %w", tool, err)
	}
	output = res.Client.Stdout + res.Client.Stderr
	if res.Client.ExitCode != 0 || res.Server.ExitCode != 0 {
		return tool, command, nil, output, fmt.Errorf("%s: client exit %d (%s), server exit %d (%s)", tool,
			res.Client.ExitCode, firstLine(res.Client.Stderr+res.Client.Error),
			res.Server.ExitCode, firstLine(res.Server.Stderr+res.Server.Error))
	}
	figures, err = ParsePerftest(output)
	if err == nil && figures["MsgRate"] > 0 {
		figures["msg/s"] = figures["MsgRate"] * 1e6
	}
	return tool, command, figures, output, err
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
// value of inf or nan is ErrPerftestClock.
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
