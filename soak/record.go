package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// FileName is a soak's record inside its results directory.
const FileName = "soak.json"

// Save writes res into dir as FileName, with the command that ran it
// and its backend, and returns the file's path.
func Save(dir string, command []string, backend string, res *Result) (string, error) {
	b, err := json.MarshalIndent(struct {
		Tool    string   `json:"tool"`
		Kind    string   `json:"kind"`
		Command []string `json:"command"`
		Backend string   `json:"backend"`
		*Result
	}{"rdmaprobe", "soak", command, backend, res}, "", " ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName)
	return path, result.WriteFileAtomic(path, append(b, '\n'), 0o644)
}

// PrintHeader writes the head of the table PrintSample adds a row to.
func PrintHeader(w io.Writer) {
	fmt.Fprintf(w, "%8s %9s %9s %10s %6s %7s %8s %10s %8s\n",
		"elapsed", "served", "RSS MiB", "heap KiB", "files", "threads", "mappings", "connects/s", "failures")
}

// PrintSample writes x as a row of the table.
func PrintSample(w io.Writer, x Sample) {
	fmt.Fprintf(w, "%7.0fs %9d %9.1f %10.0f %6d %7d %8d %10.1f %8d\n",
		x.ElapsedSec, x.Served, float64(x.RSSBytes)/(1<<20), float64(x.RetainedHeapBytes)/1024,
		x.OpenFiles, x.Threads, x.Mappings, x.ConnectsPerSec, x.Failures)
}
