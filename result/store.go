package result

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileName is the run file inside a run directory.
const FileName = "run.json"

// NewRunDir creates results/<UTC timestamp>-<backend>/ under root and
// returns its path; a second run in the same second gets a suffix.
func NewRunDir(root, backend string, t time.Time) (string, error) {
	base := filepath.Join(root, t.UTC().Format("20060102T150405Z")+"-"+backend)
	dir := base
	for i := 2; ; i++ {
		err := os.MkdirAll(filepath.Dir(dir), 0o755)
		if err == nil {
			err = os.Mkdir(dir, 0o755)
		}
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create results directory: %w", err)
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// GzipAbove is the size of a run's JSON above which SaveRun compresses
// it (run.json.gz): the per-client records grow a run with its clients
// (results/README.md has the bytes a client). A smaller run stays
// plain, indented JSON, to read with jq or an editor; Load reads either.
const GzipAbove = 1_000_000

// SaveRun saves run in dir as FileName, or as FileName+".gz" when its
// JSON is larger than GzipAbove, and returns the path it wrote. Each
// save is atomic (see Save). A run that grows past GzipAbove between
// saves moves to the .gz file, and the plain file it supersedes is
// removed only once the new one is in place, so the directory always
// holds a complete run.
func SaveRun(dir string, run *Run) (string, error) {
	b, err := json.Marshal(run)
	if err != nil {
		return "", fmt.Errorf("encode run: %w", err)
	}
	path := filepath.Join(dir, FileName)
	stale := path + ".gz"
	if len(b) > GzipAbove {
		// Compact: indented, a record column is a line per value, and
		// the file is for jq more than for an editor.
		if b, err = gzipBytes(append(b, '\n')); err != nil {
			return "", fmt.Errorf("save %s: gzip: %w", stale, err)
		}
		path, stale = stale, path
	} else {
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, "", " "); err != nil {
			return "", fmt.Errorf("encode run: %w", err)
		}
		b = append(ind.Bytes(), '\n')
	}
	if err := WriteFileAtomic(path, b, 0o644); err != nil {
		return "", err
	}
	if err := os.Remove(stale); err != nil && !errors.Is(err, os.ErrNotExist) {
		return path, fmt.Errorf("remove %s, superseded by %s: %w", stale, path, err)
	}
	return path, nil
}

// Save writes run to path atomically: a temporary file in the same
// directory, synced, then renamed over path. A reader never sees a torn
// file, and an interrupted run keeps the last complete version.
func Save(path string, run *Run) error {
	b, err := encode(run)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, b, 0o644)
}

func encode(run *Run) ([]byte, error) {
	b, err := json.MarshalIndent(run, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encode run: %w", err)
	}
	return append(b, '\n'), nil
}

// gzipBytes compresses b with no name or time in the header, so the same
// run compresses to the same bytes. The default level, because a run is
// saved after every point: on this project's 2-core host it compresses
// a 48 MB run 7.6 times in 2.8 s, where the best level gains 6% for 18 s.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFileAtomic writes data to path through a temporary file and rename.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("save %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// Load reads a run file. Every problem is one line naming the file:
// unreadable, truncated or corrupt JSON, not an rdmaprobe run, another
// kind of rdmaprobe file (a bench run), or a schema newer than this build.
//
// A gzip-compressed file (run.json.gz, as SaveRun writes a large run)
// is decompressed first.
func Load(path string) (*Run, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	run, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return run, nil
}

// ReadFile returns the bytes of a saved rdmaprobe file, decompressed if
// it is gzip; a gzip error names the file.
func ReadFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		if b, err = gunzip(b); err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
	}
	return b, nil
}

// KindRun is the kind of a capacity run; run.json files carry no kind
// field, so its absence means a run.
const KindRun = "run"

// ReadKind says what a saved rdmaprobe file holds, so a command can hand
// it to the right parser: KindRun, or the kind the file names ("bench"),
// with the file's (decompressed) bytes, so it is read once. A file that
// is empty, truncated, corrupt or not rdmaprobe's gets the same one-line
// error, naming the file, as Load gives.
func ReadKind(path string) (string, []byte, error) {
	b, err := ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	h, err := ParseHead(b)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	return h.Kind, b, nil
}

// maxRunBytes bounds a decompressed run, far above what millions of
// clients' records take.
const maxRunBytes = 1 << 32

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxRunBytes+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxRunBytes {
		return nil, fmt.Errorf("decompresses to more than %d bytes", maxRunBytes)
	}
	return out, nil
}

// Head is what every rdmaprobe file starts with.
type Head struct {
	SchemaVersion int
	Tool          string
	// Kind is KindRun when the file does not say.
	Kind string
}

// ParseHead checks that b is a whole JSON document written by rdmaprobe
// and returns its head. The schema version is the kind's own, so it is
// returned, not judged.
func ParseHead(b []byte) (Head, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Head{}, errors.New("empty file, not a run")
	}
	var head struct {
		SchemaVersion *int    `json:"schema_version"`
		Tool          *string `json:"tool"`
		Kind          *string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Head{}, DescribeJSONError(b, err)
	}
	if head.SchemaVersion == nil || head.Tool == nil || *head.Tool != "rdmaprobe" {
		return Head{}, errors.New("not an rdmaprobe run (no schema_version/tool fields)")
	}
	h := Head{SchemaVersion: *head.SchemaVersion, Tool: *head.Tool, Kind: KindRun}
	if head.Kind != nil && *head.Kind != "" {
		h.Kind = *head.Kind
	}
	return h, nil
}

// Readable refuses a schema version this build cannot read; max is the
// newest version of the file's kind.
func (h Head) Readable(max int) error {
	if h.SchemaVersion > max {
		return fmt.Errorf("schema version %d is newer than this build reads (%d): use a newer rdmaprobe", h.SchemaVersion, max)
	}
	if h.SchemaVersion < 1 {
		return fmt.Errorf("invalid schema version %d", h.SchemaVersion)
	}
	return nil
}

// Parse decodes a run from JSON (see Load).
func Parse(b []byte) (*Run, error) {
	h, err := ParseHead(b)
	if err != nil {
		return nil, err
	}
	switch h.Kind {
	case KindRun:
	case "bench":
		return nil, errors.New(`a bench file (kind "bench"), not a capacity run: render it with rdmaprobe report, compare it with other bench files`)
	default:
		return nil, fmt.Errorf("kind %q, not a capacity run: this build reads runs and bench files only", h.Kind)
	}
	if err := h.Readable(SchemaVersion); err != nil {
		return nil, err
	}
	var run Run
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&run); err != nil {
		return nil, DescribeJSONError(b, err)
	}
	return &run, nil
}

// DescribeJSONError turns a decoding error of b into one line a user can
// act on.
func DescribeJSONError(b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &se) && strings.Contains(se.Error(), "unexpected end of JSON input")):
		return fmt.Errorf("truncated JSON (%d bytes): the file was cut off while being written or copied", len(b))
	case errors.As(err, &se):
		return fmt.Errorf("corrupt JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		return fmt.Errorf("field %q has the wrong type (%s where %s was expected)", te.Field, te.Value, te.Type)
	}
	return fmt.Errorf("invalid JSON: %v", err)
}
