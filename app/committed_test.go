package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/bench"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// committedRuns are the saved runs and bench files under results/, at
// any depth.
func committedRuns(t *testing.T) []string {
	t.Helper()
	var runs []string
	err := filepath.WalkDir("../results", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); !d.IsDir() && (strings.HasPrefix(n, result.FileName) || strings.HasPrefix(n, bench.FileName)) {
			runs = append(runs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 {
		t.Fatal("no saved runs under ../results")
	}
	return runs
}

// Every committed run and bench file renders with this build (report
// regenerates what the repository does not keep), and every earlier
// schema version has a committed run among them: a build that stops
// reading an old run fails here. The reports render in parallel
// subtests: each is in-process work on one file, which starts no
// process (noChildren's concern) and runs beside no other test.
func TestCommittedRunsRender(t *testing.T) {
	versions := map[int]bool{}
	// The parallel reports run inside a group, so that this test's time
	// (go test -json) includes theirs: a test's own leaves out its
	// parallel subtests'.
	t.Run("report", func(t *testing.T) {
		for i, p := range committedRuns(t) {
			b, err := result.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			h, err := result.ParseHead(b)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if h.Kind == result.KindRun {
				versions[h.SchemaVersion] = true
			}
			t.Run(strings.TrimPrefix(p, "../results/"), func(t *testing.T) {
				t.Parallel()
				out := filepath.Join(t.TempDir(), "r")
				stdout, errOut, code := run(t, "report", p, "--report-dir", out)
				if code != ExitMeasured {
					t.Fatalf("report %s: exit %d\n%s\n%s", p, code, stdout, errOut)
				}
				for _, f := range []string{"report.md", "report.html"} {
					if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
						t.Errorf("report %s wrote no %s: %v", p, f, err)
					}
				}
			})
			if testing.Short() && i > 3 {
				break
			}
		}
	})
	for v := 1; v < result.SchemaVersion; v++ {
		if !versions[v] {
			t.Errorf("no committed run of schema version %d: keep one under results/ so that this build is tested against it", v)
		}
	}
}

// What results/ commits stays small enough for every clone to carry: at
// most 10 MB, no file over 1 MB, and none of the reports that report
// and compare regenerate. It reads the files git tracks, so runs a
// developer saved there and did not add are not counted.
func TestResultsLean(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the committed files cannot be listed")
	}
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z", "results").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the committed files cannot be listed", err)
	}
	const maxTotal, maxFile = 10 << 20, 1 << 20
	total, n := int64(0), 0
	for _, p := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		st, err := os.Stat(filepath.Join("..", p))
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		n++
		total += st.Size()
		if st.Size() > maxFile {
			t.Errorf("%s is %d bytes, over 1 MB: slim it (results/README.md says how)", p, st.Size())
		}
		base := filepath.Base(p)
		if ext := filepath.Ext(p); ext == ".png" || ext == ".html" || base == "report.md" || base == "compare.md" {
			t.Errorf("%s is a report that rdmaprobe report regenerates: do not commit it", p)
		}
	}
	if n == 0 {
		t.Fatal("git lists no files under results/")
	}
	if total > maxTotal {
		t.Errorf("results/ commits %d bytes, over 10 MB", total)
	}
}
