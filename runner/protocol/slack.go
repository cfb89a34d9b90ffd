package protocol

import (
	"os"
	"strconv"
	"time"

	"github.com/rdmaprobe/rdmaprobe/client"
)

// ConnectTimerSlack is the timer slack of the built-in server's and the
// load generators' threads while clients connect and through a
// closed-loop traffic phase (SlackenThreads).
const ConnectTimerSlack = 10 * time.Millisecond

// SlackenThreads sets the timer slack of every thread of process pid
// (0: this one) to slack and returns what puts back the kernel's
// default. Threads started meanwhile inherit it from the thread that
// starts them, so the reset covers them.
//
// Why, while clients connect: in the TCG guest almost every system call
// of the server and the generators (verbs calls, TCP connects, loopback
// writes) outlasts a tick of the Go runtime's sysmon, which then keeps
// sleeping 20 µs at a time. Each sleep is a timer interrupt and two
// context switches under emulation: perf in the guest put the server's
// and the generator's sysmon at 4-8% of all the guest's CPU each during
// the connect window of 1000 clients. With 10 ms of slack the kernel
// coalesces those wakeups (0.4-0.7% each). Nothing timed while clients
// connect waits on a timer: phases and round trips are measured from
// completions, deadlines are a minute.
//
// The slack stays through a closed-loop traffic phase (KeepsSlack): its
// messages go out as echoes come back, never on a timer, and the same
// sysmon sleeps cost more there. In the phase each side's hot loop is in
// a verbs call of tens of µs per message (rxe delivers a SEND inside the
// post), so with the default slack sysmon keeps retaking the caller's
// processor and waking another thread for it, which preempts the other
// side's busy-polling loop on the guest's other CPU: ~3,000 sysmon wakes
// and ~2,200 involuntary switches of the generator's polling thread in
// 4 s at 10 clients, against ~330 and ~380 with the slack. `ramp
// --backend verbs --clients 1,10 --traffic 4s --busy-poll 2ms` in the
// guest, 5 turns each in alternation: 10 clients 11,684 msg/s median (p99
// 5.1-8.8 ms) with the default slack, 13,870 with the slack kept (p99
// 1.4-2.9 ms); 1 client p99 0.67-0.99 ms against 0.34-0.52 ms. Without
// --busy-poll (3 turns each): 1 client 1,106-1,516 msg/s, p50 0.58-0.83
// ms, against 2,188-2,413 msg/s, p50 0.39-0.41 ms; 10 clients 4,769-
// 5,536 against 8,086-10,736 msg/s. The open loop paces messages with
// timers: there the slack goes before the phase.
//
// Another process's or thread's slack needs CAP_SYS_NICE (root, as in
// the guest); without it, threads keep theirs and nothing else changes.
func SlackenThreads(pid int, slack time.Duration) (restore func()) {
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	set := func(v int64) {
		tids, _ := os.ReadDir("/proc/" + proc + "/task")
		for _, t := range tids {
			// /proc/TID/ (not /proc/PID/task/TID/) holds a thread's.
			os.WriteFile("/proc/"+t.Name()+"/timerslack_ns", []byte(strconv.FormatInt(v, 10)), 0) // best effort, see above
		}
	}
	set(slack.Nanoseconds())
	return func() { set(0) }
}

// KeepsSlack reports whether the server's and the generators' timer
// slack stays on through the traffic phase after the connect: a
// closed-loop phase, which no timer paces (SlackenThreads says why).
func KeepsSlack(t client.TrafficConfig) bool { return t.Duration > 0 && t.Rate <= 0 }
