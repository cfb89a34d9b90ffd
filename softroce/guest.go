package softroce

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// BootConfig and Guest are declared for every OS, so callers build
// anywhere; only Linux hosts boot a guest (Boot elsewhere says so).

// DefaultCPUModel is the guest's QEMU -cpu: under TCG every CPU feature
// is emulated, and qemu64 (QEMU's own default, AMD, SSE2) connected
// clients fastest of the models measured, changing nothing in what is
// measured but how fast the emulation runs (results/README.md, "The
// guest's CPU model").
const DefaultCPUModel = "qemu64"

// ErrStalled marks a boot that hung before ready (BootConfig.StallTimeout);
// the caller of a linked guest, which Boot does not start again, can
// boot the pair again on a new link when errors.Is says a boot stalled.
var ErrStalled = errors.New("guest stalled before ready")

// BootAttempts is how many times a guest whose boots stall is started
// (by Boot, or for a linked pair by its caller). The hang is rare, but
// one retry was not enough: a CI run saw the boot that followed a
// stalled one hang too.
const BootAttempts = 3

// WrapStalls adds the earlier attempts' stalls to the last attempt's error.
func WrapStalls(err error, stalls []string) error {
	if len(stalls) == 0 {
		return err
	}
	return fmt.Errorf("%w (and before that: %s)", err, strings.Join(stalls, "; "))
}

// BootConfig says how to run the guest.
type BootConfig struct {
	Image Image
	// CPUs is the number of vCPUs; default 2.
	CPUs int
	// MemMiB is guest memory; default 8192.
	MemMiB int
	// LogPath receives the serial console (kernel messages, guest logs);
	// empty discards it, though panic lines are still reported.
	LogPath string
	// Retry, if set, makes this boot the retry of one that failed as it
	// says: the console is appended to LogPath after a line saying so,
	// not started afresh, so the failed boot's console stays readable.
	// Boot sets it on its own retries; the caller of a linked guest,
	// which Boot does not retry, sets it when it boots the pair again.
	Retry string
	// Accel is "tcg" (default) or "kvm". A stock Debian kernel hangs in
	// early boot under KVM on the machines we measured, so kvm is opt-in.
	Accel string
	// ReadyTimeout bounds boot to ready; default 120 s, since TCG on a
	// loaded CI runner can be several times slower than on a quiet one.
	ReadyTimeout time.Duration
	// StallTimeout ends a boot whose console has been silent this long
	// before the guest is ready; default 30 s, negative turns it off. A
	// normal boot's longest silence here is about 0.3 s, but QEMU's TCG
	// very rarely hangs a guest in early kernel init (seen in CI: silent
	// after "futex hash table entries" at 2 s of uptime, or after
	// "sched_clock: Marking stable" at 5 s, until the ready timeout).
	// Boot then starts the guest again, up to BootAttempts boots in all,
	// unless it has a Link (the link is used up by the first QEMU: the
	// caller boots the pair again on a new one), and says so in
	// Guest.Stalls and the console log.
	StallTimeout time.Duration
	// QEMU overrides the qemu-system-x86_64 path.
	QEMU string
	// KernelArgs are appended to the kernel command line.
	KernelArgs []string
	// CPUModel is QEMU's -cpu; default DefaultCPUModel.
	CPUModel string
	// Netdev also sets up NetdevRxe on a dummy netdev in the guest, for
	// servers that need GID index 0 or rdma_cm (see netdev.go).
	Netdev bool
	// Link, if set, is this guest's end of a link to another guest: a
	// virtio-net NIC with LinkRxe on it (see link.go). Boot takes it
	// over and closes the host's copy once QEMU has it.
	Link *LinkEnd
}

// Guest is a running softroce VM.
type Guest struct {
	// BootTime is from starting QEMU to the guest's ready message.
	BootTime time.Duration
	// Ready is what the guest reported when it became ready.
	Ready Info
	// PID is QEMU's process ID.
	PID int
	// Stalls counts boots of this guest that hung before ready and were
	// retried (see BootConfig.StallTimeout).
	Stalls int

	cmd  *exec.Cmd
	conn *os.File
	out  *lineWriter
	logF *os.File

	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan response

	readyCh   chan response // id-0 messages
	readerErr error
	readerEnd chan struct{} // channel reader finished
	exited    chan struct{} // QEMU reaped and console drained
	waitErr   error
	console   *consoleTail
	stderr    *consoleTail
	closeOnce sync.Once
	freeOnce  sync.Once
	closeErr  error
	poweroff  atomic.Bool
}
