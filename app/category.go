package app

import (
	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/internal/clihelp"
	"github.com/rdmaprobe/rdmaprobe/internal/screen"
)

// Help groups of the flags, in the order of the task: what to probe,
// where, how many clients, their traffic, the output, then the rest.
const (
	catServer   = "Server under test"
	catBackend  = "Where the QPs come from"
	catCounts   = "Client counts"
	catBench    = "Measurement"
	catSoak     = "Waves and sampling"
	catPass     = "Pass criteria"
	catClients  = "Clients (load generators)"
	catTraffic  = "Traffic and SLOs"
	catOutput   = "Output and sampling"
	catHosts    = "Advanced: load-generator hosts"
	catCommands = "Advanced: your own server and clients (commands)"
	catTLS      = "Advanced: TLS and certificates"
	catSim      = "Backend-specific: sim"
	catVM       = "Backend-specific: vm (the QEMU guest)"
)

// helpGroups lists each group's flags in the order --help shows them;
// "command/flag" overrides "flag" where a command uses a flag for
// something else. TestFlagCategories fails for a visible flag of the
// categorized commands that has none, so a new flag needs a place here.
var helpGroups = []struct {
	name  string
	flags []string
}{
	{catServer, []string{"mode", "max-clients", "mux", "detach", "backlog", "srq-depth", "nofile", "memlock",
		"serve/listen", "serve/max-clients", "serve/mode", "serve/mux", "serve/msg-size", "serve/depth", "serve/busy-poll",
		"serve/remote", "serve/detach", "serve/backlog", "serve/nofile", "serve/memlock",
		"bench soak/max-clients", "bench soak/mode", "bench soak/msg-size",
		"bench rdmacm/cmtime", "bench rdmacm/cm-port"}},
	{catBackend, []string{"backend", "device", "device-port", "gid-index"}},
	{catCounts, []string{"lo", "hi", "clients", "staircase", "resolution", "max-n", "trials"}},
	{catBench, []string{"bench/ops", "bench/passes", "bench/concurrency", "bench/warmup", "bench/msg-size",
		"bench/op-timeout", "bench/tls-kex",
		"bench rdmacm/connections", "bench rdmacm/passes", "bench rdmacm/cm-modes", "bench rdmacm/op-timeout"}},
	{catSoak, []string{"bench soak/soak-duration", "bench soak/wave", "bench soak/traffic", "bench soak/interval"}},
	{catPass, []string{"criterion", "threshold", "slo", "require", "stop-on-error"}},
	{catClients, []string{"procs", "connect-rate", "inflight", "timeout", "rounds", "msg-size", "wall-stop",
		"tls-kex", "tls-resume", "gomaxprocs", "bench soak/inflight"}},
	{catTraffic, []string{"traffic", "traffic-max", "op", "depth", "msg-rate", "msg-timeout", "busy-poll"}},
	{catOutput, []string{"results", "quiet", "events", "metrics-addr", "metrics-linger", "sample-interval", "calibrate", "profile",
		"serve/ready-file", "serve/debug-addr", "serve/metrics-addr", "serve/profile",
		"bench/results", "bench soak/results", "bench rdmacm/results"}},
	{catHosts, []string{"hosts", "hostfile", "launcher", "ssh", "srun", "server-host"}},
	{catCommands, []string{"server-cmd", "server-port", "server-addr", "server-ready", "server-start-timeout",
		"server-stop-grace", "server-build", "server-build-cache", "target-dir",
		"client-kind", "client-cmd", "client-stdin", "client-ok", "client-count",
		"cm-private-data", "cm-steps", "cm-server-echoes"}},
	{catTLS, []string{"serve/cert", "serve/key", "serve/cert-out", "serve/client-ca", "serve/client-cert-out",
		"serve/client-key-out", "serve/tls-kex", "serve/tls-tickets", "serve/handshake-timeout", "serve/exchange-timeout"}},
	{catSim, []string{"sim-max-qp", "sim-max-cq", "sim-max-mr", "sim-max-pd", "sim-service-delay",
		"sim-service-delay-from", "sim-ud-loss", "sim-qp-cache", "sim-in-vm"}},
	{catVM, []string{"vm-cpus", "vm-mem", "vm-cpu-model", "vm-max-map-count", "vm-kernel-args", "vm-peer", "vm-no-reference"}},
}

// flagValue names what a flag takes, for --help and docs/flags.md; a
// flag not here takes N (whole numbers), X (numbers) or DURATION, by its
// type, and TestHelpPlaceholders fails for a text flag missing here.
var flagValue = map[string]string{
	"mode": "DESIGN", "backend": "NAME", "device": "NAME",
	"clients": "LIST", "resolution": "N|P%", "criterion": "connect|traffic", "slo": "SLOS", "require": "N[:CRITERION]",
	"tls-kex": "GROUP", "threshold": "PERCENT", "connect-rate": "RATE", "msg-rate": "RATE", "gomaxprocs": "split|all", "op": "send|write|read", "results": "DIR", "events": "FILE",
	"metrics-addr": "HOST:PORT", "profile": "DIR", "hosts": "HOST[:SLOTS],...", "hostfile": "FILE",
	"launcher": "ssh|slurm", "ssh": "COMMAND", "srun": "COMMAND", "server-host": "HOST",
	"server-cmd": "COMMAND", "server-addr": "IP[:PORT]", "server-ready": "REGEXP", "server-build": "COMMAND",
	"server-build-cache": "DIR", "target-dir": "DIR", "client-kind": "KIND", "client-cmd": "COMMAND",
	"client-stdin": "TEXT", "client-ok": "REGEXP", "client-count": "held|launched", "cm-private-data": "HEX|@FILE",
	"cm-steps": "MODE", "vm-cpu-model": "MODEL", "vm-kernel-args": "ARGS", "vm-mem": "MIB", "memlock": "BYTES",
	"listen": "HOST:PORT", "cert": "FILE", "key": "FILE", "cert-out": "FILE", "client-ca": "FILE",
	"client-cert-out": "FILE", "client-key-out": "FILE", "ready-file": "FILE", "debug-addr": "HOST:PORT",
	"report-dir": "DIR", "format": "FORMATS", "cm-modes": "MODES", "cmtime": "PROGRAM", "addr": "HOST:PORT", "ca": "FILE",
	"spec": "JSON", "cpuprofile": "FILE",
}

// valueName is the placeholder of f.
func valueName(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok || !df.TakesValue() {
		return ""
	}
	name := f.Names()[0]
	if v, ok := flagValue[name]; ok {
		return v
	}
	return clihelp.TypeValue(f)
}

// categorized are the commands whose --help groups the flags, a
// subcommand after its command and a space.
var categorized = []string{"search", "ramp", "serve", "bench", "bench soak", "bench rdmacm", "hostinfo"}

// groups are helpGroups as clihelp takes them.
func groups() []clihelp.Group {
	out := make([]clihelp.Group, len(helpGroups))
	for i, g := range helpGroups {
		out[i] = clihelp.Group{Name: g.name, Flags: g.flags}
	}
	return out
}

// helpPrinter prints every command's help; urfave/cli's HelpPrinter is a
// package variable, so it is set once for the process.
func init() {
	cli.HelpPrinter = clihelp.Printer{Width: screen.MinWidth, Groups: clihelp.Names(groups()), Value: valueName, Default: clihelp.DefaultText}.Print
}
