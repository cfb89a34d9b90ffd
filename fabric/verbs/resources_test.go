//go:build verbs && cgo

package verbs

import (
	"os"
	"os/exec"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/collectors"
)

// The collectors' netlink counts agree with the kernel's own tool,
// `rdma -j resource show`, and both see exactly the objects this test
// creates. With -v the tool's raw output is logged (the fixtures under
// collectors/testdata came from here).
func TestResourceCountsMatchRdmaTool(t *testing.T) {
	dev := openDev(t, -1)
	if _, err := exec.LookPath("rdma"); err != nil {
		t.Skip("rdma (iproute2) not installed")
	}
	base, err := collectors.DeviceResources(dev.Name())
	if err != nil {
		t.Fatal(err)
	}
	pd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	const n = 3
	for range n {
		e, err := newEP(dev, pd)
		if err != nil {
			t.Fatal(err)
		}
		defer e.close()
	}
	now, err := collectors.DeviceResources(dev.Name())
	if err != nil {
		t.Fatal(err)
	}
	got := collectors.Subtract(now, base)
	want := map[string]int{"pd": 1, "cq": 2 * n, "mr": 2 * n, "qp": n}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("netlink: %s grew by %d, want %d (all: %v)", k, got[k], v, got)
		}
	}

	out := rdmaTool(t, "resource", "show")
	tool, err := collectors.ParseSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range collectors.ResourceKinds {
		if tool[dev.Name()][k] != now[k] {
			t.Errorf("%s: rdma tool says %d, netlink %d", k, tool[dev.Name()][k], now[k])
		}
	}
	for _, kind := range []string{"qp", "mr"} {
		raw := rdmaTool(t, "resource", "show", kind)
		count, size, err := collectors.ParseObjects(raw, dev.Name())
		if err != nil {
			t.Fatal(err)
		}
		// The kernel names the creating thread; sum this process's.
		mine, bytes := 0, int64(0)
		for tid, c := range count {
			if collectors.Tgid(tid) == os.Getpid() {
				mine += c
				bytes += size[tid]
			}
		}
		if mine != want[kind] {
			t.Errorf("rdma resource show %s: %d owned by this process, want %d (by thread %v)", kind, mine, want[kind], count)
		}
		if kind == "mr" && bytes != 2*n*msgSize {
			t.Errorf("registered bytes %d, want %d", bytes, 2*n*msgSize)
		}
	}
}

func rdmaTool(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("rdma", append([]string{"-j"}, args...)...).Output()
	if err != nil {
		t.Fatalf("rdma -j %v: %v", args, err)
	}
	if testing.Verbose() {
		t.Logf("rdma -j %v:\n%s", args, out)
	}
	return out
}
