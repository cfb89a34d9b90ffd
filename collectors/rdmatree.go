package collectors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// TreeKinds are the object kinds counted for a server's process tree:
// what a third-party server holds per client shows in some of them
// (rping makes a PD and an rdma_cm ID per connection, from a thread per
// connection), so all are read.
var TreeKinds = []string{"qp", "cq", "mr", "pd", "srq", "ctx", "cm_id"}

// TreeResources counts the objects on device created by any task of the
// processes pids (a server and its workers; their threads included),
// one `rdma -j resource show KIND` dump per kind, plus "mr_bytes", the
// registered length of their MRs.
func TreeResources(ctx context.Context, device string, pids []int) (map[string]int, error) {
	dumps := map[string][]byte{}
	for _, kind := range TreeKinds {
		data, err := rdmaDump(ctx, kind)
		if err != nil {
			return nil, err
		}
		dumps[kind] = data
	}
	return CountForProcesses(dumps, device, pids, Tgid)
}

func rdmaDump(ctx context.Context, kind string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "rdma", "-j", "resource", "show", kind)
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rdma -j resource show %s: %v %s", kind, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return data, nil
}

// CountForProcesses is TreeResources on dumps already read (kind → JSON).
// The kernel records the task that created each object, a thread's id
// for a threaded server; tgid maps it to its process.
func CountForProcesses(dumps map[string][]byte, device string, pids []int, tgid func(int) int) (map[string]int, error) {
	member := map[int]bool{}
	for _, p := range pids {
		member[p] = true
	}
	proc := map[int]int{}
	out := map[string]int{}
	for _, kind := range TreeKinds {
		data, ok := dumps[kind]
		if !ok {
			continue
		}
		count, size, err := ParseObjects(data, device)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		out[kind] = 0 // a kind read and found empty is a zero, not a gap
		for tid, n := range count {
			if tid == 0 {
				continue // the kernel's own
			}
			p, ok := proc[tid]
			if !ok {
				p = tgid(tid)
				proc[tid] = p
			}
			if member[p] || member[tid] {
				out[kind] += n
				if kind == "mr" {
					out["mr_bytes"] += int(size[tid])
				}
			}
		}
	}
	return out, nil
}

// CMListening reports whether an rdma_cm ID listens on port on any
// device: the readiness of an rdma_cm server (rping, ucmatose), which
// opens no TCP socket.
func CMListening(ctx context.Context, port int) (bool, error) {
	data, err := rdmaDump(ctx, "cm_id")
	if err != nil {
		return false, err
	}
	return ParseCMListening(data, port)
}

// ParseCMListening reads `rdma -j resource show cm_id`: is an ID in state
// LISTEN bound to port ("192.0.2.1:7174", "[::]:7174")?
func ParseCMListening(data []byte, port int) (bool, error) {
	var rows []struct {
		State string `json:"state"`
		Src   string `json:"src-addr"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		return false, fmt.Errorf("rdma cm_id dump: %w", err)
	}
	suffix := ":" + strconv.Itoa(port)
	for _, r := range rows {
		if r.State == "LISTEN" && strings.HasSuffix(r.Src, suffix) {
			return true, nil
		}
	}
	return false, nil
}
