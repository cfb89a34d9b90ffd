package bench

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// Load reads a bench file. Every problem is one line naming the file, as
// result.Load gives for runs: unreadable, empty, truncated or corrupt
// JSON, not rdmaprobe's, a capacity run instead of a bench run, or a
// schema newer than this build. A gzip-compressed file is decompressed
// first.
func Load(path string) (*Run, error) {
	b, err := result.ReadFile(path)
	if err != nil {
		return nil, err
	}
	run, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return run, nil
}

// Parse decodes a bench run from JSON (see Load).
func Parse(b []byte) (*Run, error) {
	h, err := result.ParseHead(b)
	if err != nil {
		return nil, err
	}
	if h.Kind != Kind {
		what := "an rdmaprobe file"
		if h.Kind == result.KindRun {
			what = "a capacity run"
		}
		return nil, fmt.Errorf("%s (kind %q), not a bench run: render it with rdmaprobe report, compare it with other runs of its kind", what, h.Kind)
	}
	if err := h.Readable(SchemaVersion); err != nil {
		return nil, err
	}
	var run Run
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&run); err != nil {
		return nil, result.DescribeJSONError(b, err)
	}
	return &run, nil
}
