package softroce

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// guestEnv is set on the kernel command line; the kernel hands such
// name=value words to init as environment, so a binary run as PID 1 on an
// ordinary machine (a container, say) is not mistaken for our guest.
const guestEnv = "RDMAPROBE_GUEST"

// portName is the virtio-serial port the host connects to.
const portName = "rdmaprobe.ctl"

// rxe0 is created on lo; GID index 1 is the RoCE v2 IPv4-mapped loopback
// address, the one that passes RTR (index 0, fe80::, does not).
const (
	rxeDevice   = "rxe0"
	rxeGIDIndex = 1
	rxeGID      = "0000:0000:0000:0000:0000:ffff:7f00:0001"
)

// Device is rxe0, the device rdmaprobe's own server and clients open in
// the guest, by name: the first device is no contract once the netdev
// device exists too.
const Device = rxeDevice

// Handler serves the app-defined ops inside the guest. progress sends one
// value to the host at once, so every finished piece of work has left the
// guest before the next one starts.
type Handler func(ctx context.Context, op string, payload json.RawMessage, progress func(any)) (any, error)

// request is one host→guest line.
type request struct {
	ID      uint64          `json:"id"`
	Op      string          `json:"op"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// response is one guest→host line. ID 0 is reserved for messages about the
// guest itself (ready, fatal).
type response struct {
	ID      uint64          `json:"id"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// appendLine encodes r by hand: json.Marshal would re-validate and compact
// a payload that is already compact JSON, a second full pass over
// megabytes that costs more than the channel itself under TCG. Payloads
// must come from marshalPayload, which guarantees compact, valid JSON.
func (r response) appendLine(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, r.ID, 10)
	b = append(b, `,"kind":`...)
	b = strconv.AppendQuote(b, r.Kind)
	if len(r.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, r.Payload...)
	}
	return append(b, "}\n"...)
}

const (
	kindProgress = "progress"
	kindResult   = "result"
	kindError    = "error"
	kindReady    = "ready"
	kindFatal    = "fatal"
)

// Built-in ops.
const (
	OpInfo     = "info"
	OpExec     = "exec"
	OpExecPair = "exec-pair"
	OpSysctl   = "sysctl"
	// OpListening reports whether a TCP port (the payload) is listening
	// in the guest: how a test knows a server another guest connects to
	// is ready, without connecting to it.
	OpListening = "listening"
	OpPoweroff  = "poweroff"
	opCancel    = "cancel"
)

// lineWriter writes one JSON value per line; a line is written with a
// single Write so concurrent senders never interleave.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) send(v any) error {
	var b []byte
	if r, ok := v.(response); ok {
		b = r.appendLine(nil)
	} else {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
		b = append(b, '\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(b)
	return err
}

// lineReader reads JSON lines of any length: results of a whole probe can
// be several MB on one line.
type lineReader struct {
	r *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 1<<20)}
}

func (l *lineReader) next(v any) error {
	for {
		line, err := l.r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			if err != nil {
				return err
			}
			continue
		}
		if jerr := json.Unmarshal(line, v); jerr != nil {
			return fmt.Errorf("channel: bad line (%d bytes): %w", len(line), jerr)
		}
		return nil
	}
}

func marshalPayload(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		// A handler's raw JSON is checked once here; a newline inside it
		// would split the line protocol.
		if !json.Valid(raw) {
			return nil, fmt.Errorf("payload is not valid JSON")
		}
		if bytes.IndexByte(raw, '\n') >= 0 {
			var buf bytes.Buffer
			json.Compact(&buf, raw)
			return buf.Bytes(), nil
		}
		return raw, nil
	}
	return json.Marshal(v)
}

// ExecRequest runs one command in the guest.
type ExecRequest struct {
	Argv      []string `json:"argv"`
	Env       []string `json:"env,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	Stdin     string   `json:"stdin,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	// OnlyDevice, when set, is the only RDMA device the command sees
	// (command.Spec.OnlyDevice); the guest's binary must call
	// command.EnterViewIfAsked first thing.
	OnlyDevice string `json:"only_device,omitempty"`
}

// ExecResult is what a command did. ExitCode is -1 when it was killed.
type ExecResult struct {
	ExitCode   int     `json:"exit_code"`
	Stdout     string  `json:"stdout"`
	Stderr     string  `json:"stderr"`
	DurationMS float64 `json:"duration_ms"`
	TimedOut   bool    `json:"timed_out,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// ExecPairRequest runs a server command, waits until it listens on
// TCP port Port, then runs the client: the shape of every two-sided
// verbs tool (ibv_rc_pingpong, perftest), which exchange QP numbers over
// TCP before any verbs traffic.
type ExecPairRequest struct {
	Server ExecRequest `json:"server"`
	Client ExecRequest `json:"client"`
	Port   int         `json:"port"`
}

// ExecPairResult holds both sides.
type ExecPairResult struct {
	Server ExecResult `json:"server"`
	Client ExecResult `json:"client"`
}

// Info describes the guest and its rxe device.
type Info struct {
	KernelRelease string            `json:"kernel_release"`
	CPUs          int               `json:"cpus"`
	MemTotalKiB   uint64            `json:"mem_total_kib"`
	MemAvailKiB   uint64            `json:"mem_available_kib"`
	Device        string            `json:"device"`
	PortState     string            `json:"port_state"`
	LinkLayer     string            `json:"link_layer,omitempty"`
	GIDs          map[string]string `json:"gids,omitempty"`
	Caps          map[string]int64  `json:"caps,omitempty"`
	Limits        map[string]string `json:"limits,omitempty"`
	UptimeS       float64           `json:"uptime_s"`
	// Netdev is the netdev device, when the boot asked for it.
	Netdev *NetdevInfo `json:"netdev,omitempty"`
	// Link is the link device, when the guest was booted with a link.
	Link    *LinkInfo        `json:"link,omitempty"`
	SetupMS map[string]int64 `json:"setup_ms,omitempty"`
}
