package app

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// Help groups of the flags, by the task a user has in mind.
const (
	catCounts   = "Client counts"
	catPass     = "Pass criteria"
	catClients  = "Clients (load generators)"
	catServer   = "Server under test"
	catCommands = "Your own server and clients (commands)"
	catTraffic  = "Traffic and SLOs"
	catBackend  = "Where the QPs come from (backend, guest)"
	catHosts    = "Load-generator hosts"
	catOutput   = "Output and sampling"
	catTLS      = "TLS and certificates"
	catBench    = "Measurement"
	catSoak     = "Waves and sampling"
)

// flagCategory is the help group of each flag of the commands with
// many; "command/flag" overrides "flag" where a command uses a flag for
// something else. TestFlagCategories fails for a visible flag of those
// commands that has none, so a new flag needs one line here.
var flagCategory = map[string]string{
	"lo": catCounts, "hi": catCounts, "max-n": catCounts, "resolution": catCounts, "clients": catCounts, "trials": catCounts,

	"threshold": catPass, "criterion": catPass, "require": catPass, "stop-on-error": catPass,

	"procs": catClients, "rate": catClients, "tls-resume": catClients, "inflight": catClients, "timeout": catClients, "wall-stop": catClients,
	"rounds": catClients, "msg-size": catClients, "tls-kex": catClients, "gomaxprocs": catClients,

	"max-clients": catServer, "mode": catServer, "mux": catServer, "backlog": catServer, "detach": catServer, "nofile": catServer, "memlock": catServer,

	"server-cmd": catCommands, "server-port": catCommands, "server-build": catCommands, "server-build-cache": catCommands,
	"server-ready": catCommands, "server-stop-grace": catCommands, "server-start-timeout": catCommands,
	"server-addr": catCommands, "target-dir": catCommands, "client-cmd": catCommands, "client-kind": catCommands, "cm-private-data": catCommands, "cm-server-echoes": catCommands, "cm-steps": catCommands, "client-stdin": catCommands,
	"client-ok": catCommands, "client-count": catCommands,

	"duration": catTraffic, "op": catTraffic, "depth": catTraffic, "msg-rate": catTraffic, "busy-poll": catTraffic,
	"msg-timeout": catTraffic, "slo": catTraffic, "max-duration": catTraffic,

	"backend": catBackend, "device": catBackend, "port": catBackend, "gid-index": catBackend,
	"sim-max-qp": catBackend, "sim-max-cq": catBackend, "sim-max-mr": catBackend, "sim-max-pd": catBackend,
	"sim-service-delay": catBackend, "sim-service-delay-from": catBackend, "sim-ud-loss": catBackend, "sim-in-vm": catBackend,
	"vm-cpus": catBackend, "vm-mem": catBackend, "vm-cpu-model": catBackend, "vm-max-map-count": catBackend,
	"vm-kernel-args": catBackend, "vm-peer": catBackend,

	"hosts": catHosts, "hostfile": catHosts, "launcher": catHosts, "ssh": catHosts, "srun": catHosts, "server-host": catHosts,

	"results": catOutput, "profile": catOutput, "calibrate": catOutput, "sample-interval": catOutput,
	"metrics-addr": catOutput, "metrics-linger": catOutput, "events": catOutput,

	"serve/listen": catServer, "serve/msg-size": catServer, "serve/depth": catServer, "serve/busy-poll": catServer,
	"serve/remote": catServer, "serve/ready-file": catOutput, "serve/debug-addr": catOutput,
	"serve/cert": catTLS, "serve/key": catTLS, "serve/cert-out": catTLS, "serve/client-ca": catTLS,
	"serve/client-cert-out": catTLS, "serve/client-key-out": catTLS, "serve/handshake-timeout": catTLS,
	"serve/exchange-timeout": catTLS, "serve/tls-kex": catTLS, "serve/tls-tickets": catTLS,

	"bench/n": catBench, "bench/passes": catBench, "bench/concurrency": catBench, "bench/warmup": catBench,
	"bench/msg-size": catBench, "bench/op-timeout": catBench, "bench/tls-kex": catBench, "bench/out": catOutput,

	"bench soak/duration": catSoak, "bench soak/interval": catSoak, "bench soak/wave": catSoak, "bench soak/traffic": catSoak,
	"bench soak/max-clients": catServer, "bench soak/mode": catServer, "bench soak/msg-size": catServer,
	"bench soak/inflight": catClients, "bench soak/out": catOutput,

	"bench rdmacm/n": catBench, "bench rdmacm/passes": catBench, "bench rdmacm/cm-modes": catBench,
	"bench rdmacm/op-timeout": catBench, "bench rdmacm/cmtime": catServer, "bench rdmacm/cm-port": catServer,
	"bench rdmacm/out": catOutput,
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

// categorize puts the flags of the commands with many into their help
// groups.
func categorize(app *cli.App) {
	for _, name := range categorized {
		c := commandAt(app, name)
		if c == nil {
			continue
		}
		for _, f := range c.Flags {
			cat, ok := flagCategory[name+"/"+f.Names()[0]]
			if !ok {
				cat = flagCategory[f.Names()[0]]
			}
			setCategory(f, cat)
		}
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

// quietDefaults drops the "(default: 0)" urfave/cli prints after a flag
// whose default is its type's zero value: it says nothing, and the usage
// text already says what 0 or off means where it means something.
func quietDefaults(next cli.FlagStringFunc) cli.FlagStringFunc {
	return func(f cli.Flag) string {
		s := next(f)
		for _, zero := range []string{"0", "0s", "false", `""`} {
			if t, ok := strings.CutSuffix(s, " (default: "+zero+")"); ok {
				return t
			}
		}
		return s
	}
}

// The help of every command goes through cli.FlagStringer, a package
// variable of urfave/cli, so it is set once for the process.
func init() { cli.FlagStringer = quietDefaults(cli.FlagStringer) }
