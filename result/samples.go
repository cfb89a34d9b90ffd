package result

// Sample is one reading of the collectors during a point. T is seconds
// since the point started, so series of different points align.
type Sample struct {
	T float64 `json:"t"`
	// RDMA holds per-device resource counts (pd, cq, qp, mr, ctx, cm_id,
	// srq) minus the baseline taken before the point.
	RDMA map[string]int `json:"rdma,omitempty"`
	// HostCPU is 0–100 over all CPUs; memory in bytes. For the vm backend
	// these are the guest's.
	HostCPU     float64 `json:"host_cpu_pct"`
	HostMemUsed uint64  `json:"host_mem_used"`
	// Procs are the server, the load generators and, for vm, QEMU as seen
	// from the host.
	Procs []ProcSample `json:"procs,omitempty"`
	// Counters are the per-second rises of the device port's counters
	// since the reading before (Point.DeviceCounters names them), those
	// that rose only.
	Counters map[string]float64 `json:"device_counters_per_sec,omitempty"`
}

// DeviceCounters are the device port's own counters (sysfs hw_counters
// and counters, by the driver's names; the sim's simulated ones) read
// before and after a point.
type DeviceCounters struct {
	Device string `json:"device"`
	// Source is "sysfs", or "sim" for the sim's simulated device.
	Source string            `json:"source"`
	Before map[string]uint64 `json:"before"`
	After  map[string]uint64 `json:"after"`
	// Shared: the server and the clients ran on this one device, so both
	// sides' traffic is in the counts (one guest's rxe0).
	Shared bool `json:"shared,omitempty"`
}

// Rise is how much each counter rose from Before to After, those that
// rose only; a counter that fell (reset) is left out.
func (d *DeviceCounters) Rise() map[string]uint64 {
	if d == nil {
		return nil
	}
	out := map[string]uint64{}
	for k, a := range d.After {
		if b, ok := d.Before[k]; ok && a > b {
			out[k] = a - b
		}
	}
	return out
}

// ProcSample is one process at one instant.
type ProcSample struct {
	Role    string  `json:"role"` // "server", "clients-0", "qemu"
	PID     int     `json:"pid"`
	CPU     float64 `json:"cpu_pct"` // per core, may exceed 100
	RSS     uint64  `json:"rss"`
	Threads int     `json:"threads"`
	FDs     int     `json:"fds"`
	Maps    int     `json:"maps"` // lines of /proc/PID/maps
	// Processes, for a server command that started others, is how many
	// processes of its tree the sample covers: CPU, RSS and threads are
	// their sums; open files and mappings the largest of one process
	// (RLIMIT_NOFILE and vm.max_map_count bound each process alone).
	Processes int `json:"processes,omitempty"`
}

// Peak is the highest reading of each series during a point.
type Peak struct {
	// RDMA is the device's resource counts above the baseline taken
	// before the point; Baseline is that baseline.
	RDMA     map[string]int `json:"rdma,omitempty"`
	Baseline map[string]int `json:"rdma_baseline,omitempty"`
	// ByRole splits the device's resources at full load by the process
	// that holds them ("server", "clients"), from the per-object
	// resource dump; empty when that dump was unavailable, and on a
	// staircase's steps after the first, which skip the dump (its cost
	// grows with every client held).
	ByRole map[string]map[string]int `json:"rdma_by_role,omitempty"`
	// Resources are the counts the server itself reports holding (the
	// only source on sim, where the device lives in the server process).
	Resources     map[string]int `json:"server_resources,omitempty"`
	ServerRSS     uint64         `json:"server_rss"`
	ServerMaps    int            `json:"server_maps"`
	ServerFDs     int            `json:"server_fds"`
	ServerThreads int            `json:"server_threads"`
	HostCPU       float64        `json:"host_cpu_pct"`
	HostMemUsed   uint64         `json:"host_mem_used"`
}

// Limits are the limits in force that bound capacity.
type Limits struct {
	DeviceCaps      map[string]int64 `json:"device_caps,omitempty"`
	MemlockBytes    int64            `json:"rlimit_memlock"` // -1 = unlimited
	NoFile          int64            `json:"rlimit_nofile"`
	MaxMapCount     int64            `json:"vm_max_map_count"`
	Somaxconn       int64            `json:"somaxconn"`
	ThreadsMax      int64            `json:"threads_max"`
	PidMax          int64            `json:"pid_max"`
	ListenOverflows int64            `json:"tcp_listen_overflows"` // TcpExt counters, cumulative
	ListenDrops     int64            `json:"tcp_listen_drops"`
}

// Diagnosis names the limit most likely to have stopped a point, with
// the evidence that points at it.
type Diagnosis struct {
	// Limit is a short key: "max-clients", "device-cap:max_qp",
	// "rlimit-nofile", "vm.max_map_count", "listen-backlog", "memlock",
	// "memory", "timeout", "unknown".
	Limit string `json:"limit"`
	// Summary is the one-line statement shown in the terminal: how many
	// clients failed and how, how many connected, then the limit, e.g.
	// "3,629 clients failed (ibv_create_cq: ENOMEM), 16,371 of 20,000
	// connected; server process had 65,524 mappings of vm.max_map_count
	// 65,530".
	Summary    string   `json:"summary"`
	Evidence   []string `json:"evidence,omitempty"`
	Suggestion string   `json:"suggestion,omitempty"`
}

// Cost is the per-client resource cost derived from a point's samples.
type Cost struct {
	Clients int     `json:"clients"`
	QPs     float64 `json:"qp_per_client"`
	CQs     float64 `json:"cq_per_client"`
	MRs     float64 `json:"mr_per_client"`
	PDs     float64 `json:"pd_per_client"`
	// AHs are address handles (ud mode: one per client towards it).
	AHs           float64 `json:"ah_per_client,omitempty"`
	ServerRSS     float64 `json:"server_rss_bytes_per_client"`
	RegisteredMem float64 `json:"registered_bytes_per_client,omitempty"`
}

// KernelMemory is the kernel's account of the machine's memory around a
// point (/proc/meminfo, in bytes: MemTotal, MemAvailable, Slab,
// SUnreclaim, VmallocUsed, PageTables, KernelStack), before the server
// started, with every client connected and held, and after; and the
// OOM killer's work during it. Linux only; on the vm backend the
// guest's, whose memory is the machine the point ran on.
type KernelMemory struct {
	Before map[string]uint64 `json:"before"`
	Loaded map[string]uint64 `json:"loaded,omitempty"`
	After  map[string]uint64 `json:"after,omitempty"`
	// OOMKills is how much /proc/vmstat's oom_kill rose during the
	// point: processes the kernel killed for want of memory.
	OOMKills uint64 `json:"oom_kills,omitempty"`
	// OOMLog is the kernel's own lines about it during the point (its
	// log, /dev/kmsg, where readable: "Out of memory: Killed process
	// 312 (rdmaprobe) ..."), at most five.
	OOMLog []string `json:"oom_log,omitempty"`
}

// MemInfoKeys are the /proc/meminfo fields KernelMemory keeps.
var MemInfoKeys = []string{"MemTotal", "MemAvailable", "Slab", "SUnreclaim", "VmallocUsed", "PageTables", "KernelStack"}

// KernelHeld is the kernel's own memory in a reading of /proc/meminfo:
// slab, vmalloc, page tables and kernel stacks, what a connection costs
// the kernel beyond the processes' RSS.
func KernelHeld(m map[string]uint64) uint64 {
	return m["Slab"] + m["VmallocUsed"] + m["PageTables"] + m["KernelStack"]
}
