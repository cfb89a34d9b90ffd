package app

import (
	"slices"
	"strings"

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
	{catServer, []string{"mode", "max-clients", "mux", "detach", "backlog", "nofile", "memlock",
		"serve/listen", "serve/max-clients", "serve/mode", "serve/mux", "serve/msg-size", "serve/depth", "serve/busy-poll",
		"serve/remote", "serve/detach", "serve/backlog", "serve/nofile", "serve/memlock",
		"bench soak/max-clients", "bench soak/mode", "bench soak/msg-size",
		"bench rdmacm/cmtime", "bench rdmacm/cm-port"}},
	{catBackend, []string{"backend", "device", "device-port", "gid-index"}},
	{catCounts, []string{"lo", "hi", "clients", "resolution", "max-n", "trials"}},
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
	{catVM, []string{"vm-cpus", "vm-mem", "vm-cpu-model", "vm-max-map-count", "vm-kernel-args", "vm-peer"}},
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
	switch f.(type) {
	case *cli.DurationFlag:
		return "DURATION"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return "N"
	case *cli.Float64Flag:
		return "X"
	}
	return ""
}

// categorized are the commands whose --help groups the flags, a
// subcommand after its command and a space.
var categorized = []string{"search", "ramp", "serve", "bench", "bench soak", "bench rdmacm", "hostinfo"}

// commandAt finds a command or, for "cmd sub", a subcommand.
func commandAt(app *cli.App, path string) *cli.Command {
	name, sub, _ := strings.Cut(path, " ")
	c := app.Command(name)
	if c == nil || sub == "" {
		return c
	}
	return c.Command(sub)
}

// groupOf is the help group of the flag called name in command path,
// and its rank in helpGroups (-1 when it has none).
func groupOf(path, name string) (string, int) {
	rank := 0
	for _, g := range helpGroups {
		for _, n := range g.flags {
			if n == path+"/"+name {
				return g.name, rank
			}
			rank++
		}
	}
	rank = 0
	for _, g := range helpGroups {
		for _, n := range g.flags {
			if n == name {
				return g.name, rank
			}
			rank++
		}
	}
	return "", -1
}

// categorize puts the flags of the commands with many into their help
// groups and orders them as helpGroups does, so that --help and
// docs/flags.md list them in the order of the task.
func categorize(app *cli.App) {
	for _, path := range categorized {
		c := commandAt(app, path)
		if c == nil {
			continue
		}
		rank := map[cli.Flag]int{}
		for _, f := range c.Flags {
			cat, r := groupOf(path, f.Names()[0])
			setCategory(f, cat)
			rank[f] = r
		}
		slices.SortStableFunc(c.Flags, func(a, b cli.Flag) int { return rank[a] - rank[b] })
	}
}

// setCategory sets a flag's help group; urfave/cli v2 has the field on
// each flag type but no setter in its Flag interface.
func setCategory(f cli.Flag, cat string) {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Category = cat
	case *cli.IntFlag:
		f.Category = cat
	case *cli.Uint64Flag:
		f.Category = cat
	case *cli.Float64Flag:
		f.Category = cat
	case *cli.BoolFlag:
		f.Category = cat
	case *cli.DurationFlag:
		f.Category = cat
	case *cli.StringSliceFlag:
		f.Category = cat
	}
}

// defaultText is the flag's default as help shows it, blank for its
// type's zero value: "(default: 0)" says nothing, and the usage text
// already says what 0 or off means where it means something.
func defaultText(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	v := df.GetDefaultText()
	if v == "" {
		v = df.GetValue()
	}
	v = strings.Trim(v, `"`)
	if v == "0" || v == "0s" || v == "false" || v == "[]" {
		return ""
	}
	return v
}

// helpPrinter prints every command's help; urfave/cli's HelpPrinter is a
// package variable, so it is set once for the process.
func init() {
	var order []string
	for _, g := range helpGroups {
		order = append(order, g.name)
	}
	cli.HelpPrinter = clihelp.Printer{Width: screen.MinWidth, Groups: order, Value: valueName, Default: defaultText}.Print
}
