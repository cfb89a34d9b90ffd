package report

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/analysis"
	"github.com/rdmaprobe/rdmaprobe/internal/rungen"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// largeRun is a committed sim run's last point grown to n connected
// clients held for an hour: the records of rungen.Clients and a sample
// a second, as a point of half a million clients on rxe would take.
func largeRun(tb testing.TB, n int) *result.Run {
	tb.Helper()
	run, err := result.Load(filepath.Join("..", "results", "20261206T010438Z-sim", result.FileName))
	if err != nil {
		tb.Fatal(err)
	}
	pt := run.Points[len(run.Points)-1]
	pt.Clients, pt.Records = n, rungen.Clients(rand.New(rand.NewPCG(1, 54)), n, 2)
	base := pt.Samples
	pt.Samples = nil
	for i := range 3600 {
		s := base[i%len(base)]
		s.T = float64(i)
		pt.Samples = append(pt.Samples, s)
	}
	analysis.SummarisePoint(&pt, run.Config.Threshold)
	run.Points, run.Config.RampClients = []result.Point{pt}, []int{n}
	run.PSN = result.CheckPSNs(run.Points)
	v := analysis.Conclude(run)
	run.Verdict = &v
	return run
}

// BenchmarkReport500k reads a saved run of 500,000 clients and renders
// its reports, as `rdmaprobe report` does (results/README.md has the
// figures).
func BenchmarkReport500k(b *testing.B) {
	dir := b.TempDir()
	path, err := result.SaveRun(dir, largeRun(b, 500_000))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		f, err := Load(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := WriteAll(f.Run, dir, []string{"md", "html"}); err != nil {
			b.Fatal(err)
		}
	}
}
