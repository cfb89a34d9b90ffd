package bench

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// NewRun is a bench run as it starts on backend, before its first
// measurement: this host described, cfg as asked.
func NewRun(toolVersion string, command []string, backend result.Backend, cfg Config) *Run {
	return &Run{SchemaVersion: SchemaVersion, Tool: Tool, Kind: Kind, ToolVersion: toolVersion, Command: command,
		StartedAt: time.Now().UTC(), Backend: backend, Host: Local(nil), Config: cfg}
}

// Save writes r to path whole, summarised. A bench saves after every
// measurement, so an interrupted run or a dead guest keeps what it
// finished.
func (r *Run) Save(path string) error {
	r.Summarise()
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return result.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// Finish marks r ended by err (nil: it completed) and saves it to path;
// it returns err, or the save's error.
func (r *Run) Finish(path string, err error) error {
	r.FinishedAt = time.Now().UTC()
	r.Complete = err == nil
	if err != nil {
		r.Error = err.Error()
	}
	if serr := r.Save(path); serr != nil && err == nil {
		return serr
	}
	return err
}

// CMLimits says what bounds both rdma_cm clients in a guest of cpus
// CPUs (CMRun.Limits).
func CMLimits(cpus int) string {
	return fmt.Sprintf("Both clients and cmtime's server share the guest's %d emulated CPUs (QEMU TCG), so each connect "+
		"costs CPU on both ends at once; and every rdma_cm step of either client (address and route resolution, the "+
		"CM's REQ, REP and RTU, and the server's accept) goes through the guest kernel's rdma_cm and ib_cm work queues.", cpus)
}
