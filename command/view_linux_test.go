package command

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// init points a view at the fixture tree COMMAND_VIEW_ROOT names, in
// the test binary started as a view's first step.
func init() {
	if root := os.Getenv("COMMAND_VIEW_ROOT"); root != "" {
		viewDevDir, viewClassDir = filepath.Join(root, "dev/infiniband"), filepath.Join(root, "sys/class")
	}
}

// viewFixture is /dev/infiniband and sysfs's classes for two devices,
// rxe0 and rxe1, and rdma_cm: character devices made with /dev/null's
// numbers, each named in sysfs as the kernel names them.
func viewFixture(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a view needs root (mknod, a mount namespace)")
	}
	var null unix.Stat_t
	if err := unix.Stat("/dev/null", &null); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dev := filepath.Join(root, "dev/infiniband")
	for _, d := range []string{dev, filepath.Join(root, "sys/class/infiniband_verbs/abi_version")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	owners := map[string]string{"uverbs0": "rxe0", "uverbs1": "rxe1", "umad0": "rxe0", "rdma_cm": ""}
	for name, ibdev := range owners {
		if err := unix.Mknod(filepath.Join(dev, name), unix.S_IFCHR|0o666, int(null.Rdev)); err != nil {
			t.Fatal(err)
		}
		if ibdev == "" {
			continue
		}
		class := "infiniband_verbs"
		if strings.HasPrefix(name, "umad") {
			class = "infiniband_mad"
		}
		dir := filepath.Join(root, "sys/class", class, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ibdev"), []byte(ibdev+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// A program started with OnlyDevice rxe1 finds in /dev/infiniband only
// rxe1's node and rdma_cm, with the same PID the harness started, while
// the tree outside its namespace is left as it was; a device with no
// node is refused in the program's output, and a missing program is a
// start error as without a view.
func TestOnlyDevice(t *testing.T) {
	root := viewFixture(t)
	dev := filepath.Join(root, "dev/infiniband")
	env := []string{"COMMAND_VIEW_ROOT=" + root}
	p := start(t, Spec{Argv: []string{"sh", "-c", `echo pid $$; ls ` + dev}, Env: env, OnlyDevice: "rxe1"})
	p.Wait(context.Background())
	out := strings.Fields(p.Tail())
	if e := p.Exit(); e.Code != 0 || strings.Join(out, " ") != "pid "+itoa(p.PID)+" rdma_cm uverbs1" {
		t.Errorf("exit %v, output %q; want pid %d, rdma_cm and uverbs1", e, out, p.PID)
	}
	if names, _ := os.ReadDir(dev); len(names) != 4 {
		t.Errorf("the fixture outside the view has %d nodes, want 4", len(names))
	}

	p = start(t, Spec{Argv: []string{"true"}, Env: env, OnlyDevice: "rxe9"})
	p.Wait(context.Background())
	if e := p.Exit(); e.Code != 127 || !regexp.MustCompile(`seeing only RDMA device rxe9: no character device of rxe9`).MatchString(p.Tail()) {
		t.Errorf("rxe9: exit %v, output %q", e, p.Tail())
	}
	if _, err := Start(Spec{Argv: []string{"no-such-program-here"}, OnlyDevice: "rxe1"}); err == nil {
		t.Error("a missing program started through a view")
	} else if _, ok := err.(*StartError); !ok {
		t.Errorf("missing program: %T %v, want a *StartError", err, err)
	}
}
