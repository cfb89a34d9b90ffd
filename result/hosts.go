package result

// Host is a machine the load generators ran on, when they ran on other
// hosts than the run's own (--hosts, or under Slurm): how it was reached
// and what it is.
type Host struct {
	// Name is what the launcher reaches it by: an SSH destination or a
	// Slurm node name.
	Name string `json:"name"`
	// Launcher is "ssh" or "slurm".
	Launcher string `json:"launcher"`
	// Slots is how many generator processes it takes before the next
	// host is used (mpirun's slots).
	Slots int `json:"slots"`
	// Addr is the host's address as the launcher reached it (SSH's
	// SSH_CONNECTION); a simulated port there has this address.
	Addr string `json:"addr,omitempty"`
	// Exe is the rdmaprobe the generators ran there; Copied says this
	// run's binary was copied to it (the host's OS and architecture
	// matched).
	Exe    string `json:"exe,omitempty"`
	Copied bool   `json:"copied,omitempty"`
	// Environment is what rdmaprobe there reported of the host: kernel,
	// CPUs, memory, and the RDMA device with its caps and GID.
	Environment *Environment `json:"environment,omitempty"`
}

// HostPoint is one generator host's share of a point.
type HostPoint struct {
	Host string `json:"host"`
	// Generators are the indexes of the generator processes it ran
	// (ClientRecord.Proc).
	Generators  []int   `json:"generators"`
	Attempted   int     `json:"attempted"`
	Connected   int     `json:"connected"`
	SuccessRate float64 `json:"success_rate"` // 0..1
	// ConnectSec is from the release to the host's last generator
	// reporting its clients' outcomes; ConnectRate is Connected per
	// second over it.
	ConnectSec  float64 `json:"connect_sec,omitempty"`
	ConnectRate float64 `json:"connect_rate,omitempty"`
	// Device, GID and GIDIndex are what the host's generators opened
	// (the GID the clients sent the server); Addr is their simulated
	// port's address, when simulated.
	Device   string `json:"device,omitempty"`
	GID      string `json:"gid,omitempty"`
	GIDIndex int    `json:"gid_index"`
	Addr     string `json:"addr,omitempty"`
	// Usage is what each generator measured of itself, and of its
	// device, once its clients were all connected.
	Usage []GeneratorUsage `json:"usage,omitempty"`
	// Faults are its generators that failed, classified.
	Faults []HostFault `json:"faults,omitempty"`
}

// ServerUsage is the built-in server's own reading of its CPU so far,
// which it gives when asked (serve's "usage" request): the runner asks
// at the start and the end of a traffic phase.
type ServerUsage struct {
	CPUSec float64 `json:"cpu_sec"`           // its process's user and system time
	SysSec float64 `json:"sys_sec,omitempty"` // the system part of CPUSec
	// SpinSec is the part of CPUSec its busy-polling loops spent polling
	// empty completion queues (--busy-poll): waiting, not serving.
	SpinSec float64 `json:"spin_sec"`
}

// GeneratorUsage is one load generator's own reading of itself when its
// clients' outcomes were in and the connected ones were held.
type GeneratorUsage struct {
	Generator int     `json:"generator"`
	PID       int     `json:"pid"`
	RSS       uint64  `json:"rss"`
	CPUSec    float64 `json:"cpu_sec"`
	Threads   int     `json:"threads"`
	FDs       int     `json:"fds"`
	Maps      int     `json:"maps"`
	// RDMA is the kernel's resource counts on the generator's device
	// (qp, cq, mr, pd, ...): every process of its host together. Absent
	// on sim, whose device is no kernel's.
	RDMA map[string]int `json:"rdma,omitempty"`
	// Limits are the limits of its host that bound a generator: its
	// RLIMIT_NOFILE, net.ipv4.ip_local_port_range (one port per client's
	// TCP connection), vm.max_map_count.
	Limits map[string]string `json:"limits,omitempty"`
}

// HostFault is a generator process that failed, and how.
type HostFault struct {
	Generator int    `json:"generator"`
	Class     string `json:"class"`
	Detail    string `json:"detail"`
}

// Fault classes of HostFault.
const (
	// FaultUnreachable: the launcher could not start the generator on
	// its host (SSH could not connect or log in, srun could not launch
	// the step).
	FaultUnreachable = "unreachable"
	// FaultConnectionLost: the generator started, then its launcher's
	// connection dropped (SSH exited 255 without the generator's exit).
	FaultConnectionLost = "connection-lost"
	// FaultDied: the generator exited, or was killed, before reporting
	// its clients.
	FaultDied = "died"
	// FaultHung: the generator said nothing in time (not ready before
	// the start-up bound, or no progress before the point's deadline);
	// it was killed over its launcher.
	FaultHung = "hung"
	// FaultLauncher: the launcher itself failed otherwise (a non-zero
	// exit of its own).
	FaultLauncher = "launcher-failed"
)
