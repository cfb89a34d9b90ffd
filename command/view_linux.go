package command

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// viewEnv carries the device a view holds to this binary, started in
// the program's place (Spec.OnlyDevice); the program never sees it.
const viewEnv = "RDMAPROBE_ONLY_DEVICE"

// Where the view's inputs are; variables so that tests can point them
// at a fixture tree.
var (
	viewDevDir   = "/dev/infiniband"
	viewClassDir = "/sys/class"
)

// viewStart is how Start runs argv so that it sees only device: this
// binary, which enters the view and then becomes the program
// (EnterViewIfAsked), with the same PID. argv is the program's file
// (already found) and then its own argv.
func viewStart(device string, argv []string) (prefixed, env []string, err error) {
	if device == "" || strings.ContainsAny(device, "/\x00") {
		return nil, nil, fmt.Errorf("only device %q: not a device name", device)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	return append([]string{exe}, argv...), []string{viewEnv + "=" + device}, nil
}

// EnterViewIfAsked returns at once unless this process was started as a
// view's first step (Spec.OnlyDevice). Then it enters the view and
// executes the program in its own place; it never returns. A main
// calls it before anything else.
func EnterViewIfAsked() {
	device, ok := os.LookupEnv(viewEnv)
	if !ok {
		return
	}
	os.Unsetenv(viewEnv)
	err := enterView(device)
	if err == nil {
		if len(os.Args) < 3 {
			err = errors.New("no program to run")
		} else {
			err = syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
		}
	}
	fmt.Fprintf(os.Stderr, "rdmaprobe: run %q seeing only RDMA device %s: %v\n", os.Args[min(2, len(os.Args)):], device, err)
	os.Exit(127)
}

// enterView gives this thread a mount namespace of its own whose
// /dev/infiniband holds device's character devices and the shared ones
// (rdma_cm), none of another device's. libibverbs lists only the devices
// whose character device it can open, as in a container given one
// device, so the program's first device, and only one, is device:
// chosen by name, not by the order the kernel numbered the devices in.
// The thread stays locked: exec replaces the process from it, and the
// namespace goes with it.
func enterView(device string) error {
	keep, err := viewNodes(device)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	// Private, so the mount below stays in this namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if err := unix.Mount("tmpfs", viewDevDir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", viewDevDir, err)
	}
	for _, n := range keep {
		p := filepath.Join(viewDevDir, n.name)
		if err := unix.Mknod(p, n.mode, int(n.rdev)); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
		// mknod applies the umask; the node keeps the original's mode
		// and owner.
		if err := unix.Chmod(p, n.mode&0o7777); err != nil {
			return err
		}
		if err := unix.Chown(p, n.uid, n.gid); err != nil {
			return err
		}
	}
	return nil
}

type viewNode struct {
	name     string
	mode     uint32
	rdev     uint64
	uid, gid int
}

// viewNodes lists the character devices in /dev/infiniband the view
// keeps: those that belong to device (uverbsN, umadN, issmN, named by
// their class directory's ibdev) and those of no device (rdma_cm). A
// device that does not exist is an error, not an empty view.
func viewNodes(device string) ([]viewNode, error) {
	ents, err := os.ReadDir(viewDevDir)
	if err != nil {
		return nil, err
	}
	var keep []viewNode
	found := false
	for _, e := range ents {
		owner, owned := nodeDevice(e.Name())
		if owned && owner != device {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(viewDevDir, e.Name()), &st); err != nil {
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR {
			continue
		}
		found = found || owned
		keep = append(keep, viewNode{name: e.Name(), mode: st.Mode, rdev: st.Rdev, uid: int(st.Uid), gid: int(st.Gid)})
	}
	if !found {
		return nil, fmt.Errorf("no character device of %s in %s", device, viewDevDir)
	}
	return keep, nil
}

// nodeDevice names the RDMA device a node of /dev/infiniband belongs to,
// from sysfs; owned is false for a node of no one device.
func nodeDevice(name string) (device string, owned bool) {
	for _, class := range []string{"infiniband_verbs", "infiniband_mad"} {
		b, err := os.ReadFile(filepath.Join(viewClassDir, class, name, "ibdev"))
		if err == nil {
			return strings.TrimSpace(string(b)), true
		}
	}
	return "", false
}
