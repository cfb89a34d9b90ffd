package analysis

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// capOfVerb maps the verb that failed to the device cap that bounds it
// and the resource it counts.
var capOfVerb = map[string][2]string{
	"ibv_create_qp":  {"max_qp", "qp"},
	"ibv_create_cq":  {"max_cq", "cq"},
	"ibv_reg_mr":     {"max_mr", "mr"},
	"ibv_alloc_pd":   {"max_pd", "pd"},
	"ibv_create_srq": {"max_srq", "srq"},
	"ibv_create_ah":  {"max_ah", "ah"},
}

// fewerPerClient says which server resource modes spend less of a device
// resource per client (see package server): every mode but mux uses one
// QP per client, and all one PD.
var fewerPerClient = map[string]string{
	"qp":  "every resource mode but mux uses 1 QP per client: use --mode mux (--mux logical clients share a QP), a device with a larger max_qp, or spread the clients over servers",
	"cq":  "use a mode without CQs per client (--mode shared-cq, pool or srq) or a device with a larger max_cq",
	"mr":  "use a mode without MRs per client (--mode pool or srq: one registered pool) or a device with a larger max_mr",
	"srq": "srq mode takes one SRQ per group of ⌊max_cqe/2⌋ clients: use --mode pool (no SRQ) or a device with a larger max_srq",
	"ah":  "ud mode takes 1 AH per client on the server's side, and each client 1 towards the server: put the clients on another device (--vm-peer: rxe2 in a second guest) or spread them over servers",
}

var verbRE = regexp.MustCompile(`\b(ibv_[a-z_]+)`)

// failure is the dominant way a point's clients failed.
type failure struct {
	class, errno, verb, text string
	count, failed            int
	errnoCount               int // how many of count failed with errno
}

// dominant finds the most common failure class of a point and, within
// it, the most common errno and error text.
func dominant(pt result.Point) failure {
	var f failure
	for _, k := range sortedKeys(pt.Outcomes) {
		if k == result.OutcomeOK || k == result.OutcomeUnlaunched {
			continue // unlaunched clients did not fail: the wall stopped their launch
		}
		f.failed += pt.Outcomes[k]
		if pt.Outcomes[k] > f.count {
			f.class, f.count = k, pt.Outcomes[k]
		}
	}
	errnos, texts := map[string]int{}, map[string]int{}
	for _, r := range pt.Records {
		if r.Outcome == f.class {
			if r.Errno != "" {
				errnos[r.Errno]++
			}
			if r.Error != "" {
				texts[r.Error]++
			}
		}
	}
	if len(texts) == 0 {
		texts = pt.Errors
	}
	f.errno = argmax(errnos)
	f.errnoCount = errnos[f.errno]
	f.text = argmax(texts)
	if m := verbRE.FindStringSubmatch(f.text); m != nil {
		f.verb = m[1]
	}
	return f
}

// mapGuardRE reads the server's map-guard refusal (server/mapguard.go).
var mapGuardRE = regexp.MustCompile(`holds (\d+) of vm\.max_map_count (\d+) mappings, (\d+) more are being created`)

// Diagnose names the limit that most likely stopped a failed point,
// combining the dominant failure and its errno with the samples (pt.Peak)
// and the limits before and after the point (zero Limits when they were
// not read: the limits they hold are then not blamed). maxClients is the
// server's cap for the point. It returns nil for a point where no client
// failed and nothing went wrong.
func Diagnose(pt result.Point, before, after result.Limits, maxClients int) *result.Diagnosis {
	c := newDiagCase(pt, before, after, maxClients)
	// The first limit that explains the failure is the diagnosis: the
	// harness's and the generators' own before the server's, a refusal
	// the server chose before a bound it met, the bounds a sample shows
	// at its limit before those only the errno points at.
	for _, found := range []func(*diagCase) bool{
		(*diagCase).harness, (*diagCase).oomKilled, (*diagCase).generators, (*diagCase).atMaxClients,
		(*diagCase).mapGuard, (*diagCase).mapCount, (*diagCase).openFiles,
		(*diagCase).deviceCap, (*diagCase).allocFailure, (*diagCase).cmEvents, (*diagCase).listenBacklog, (*diagCase).serverError,
	} {
		if found(c) {
			return c.d
		}
	}
	return c.otherwise()
}

// diagCase is one point being diagnosed: what failed (f), where the
// findings go (d), and the wording every summary shares.
type diagCase struct {
	pt            result.Point
	before, after result.Limits
	maxClients    int
	f             failure
	peak          *result.Peak // never nil: zero without samples
	d             *result.Diagnosis
	// failedAt says how many clients failed as what and how many
	// connected: "3 clients failed (ibv_create_qp: EINVAL), 200 of 203
	// connected".
	failedAt string
}

func newDiagCase(pt result.Point, before, after result.Limits, maxClients int) *diagCase {
	c := &diagCase{pt: pt, before: before, after: after, maxClients: maxClients, f: dominant(pt), peak: pt.Peak, d: &result.Diagnosis{}}
	if c.peak == nil {
		c.peak = &result.Peak{}
	}
	f := c.f
	if f.failed > 0 {
		c.ev("%s of %s clients failed; most as %s (%s)", Thousands(f.failed), Thousands(pt.Attempted), f.class, Thousands(f.count))
		if f.text != "" {
			c.ev("most common error: %s", f.text)
		}
	}
	for _, m := range counterRises(before, after) {
		c.ev("%s during the point", m)
	}
	what := f.class
	if f.verb != "" {
		what = f.verb
	}
	switch {
	case f.errno != "" && f.errnoCount < f.count:
		what += fmt.Sprintf("; %s of them %s", Thousands(f.errnoCount), f.errno)
	case f.errno != "":
		what += ": " + f.errno
	}
	c.failedAt = fmt.Sprintf("%s failed (%s), %s of %s connected",
		clients(f.count), what, Thousands(pt.Connected), Thousands(attempted(pt)))
	return c
}

// clients is "1 client" or "n clients".
func clients(n int) string {
	if n == 1 {
		return "1 client"
	}
	return Thousands(n) + " clients"
}

// attempted is how many clients a point accounts for (those the wall
// left unlaunched too), else the count it was for.
func attempted(pt result.Point) int {
	if pt.Attempted > 0 {
		return pt.Attempted
	}
	return pt.Clients
}

// counterRises says which of the kernel's cumulative counters, read
// before and after a point, rose during it and by how much: a counter
// the limits hold is evidence whatever the clients' failure class.
// Limits after the point that were not read (zero) show no rise.
func counterRises(before, after result.Limits) []string {
	var moved []string
	for _, c := range []struct {
		name          string
		before, after int64
	}{
		{"tcp_listen_overflows", before.ListenOverflows, after.ListenOverflows},
		{"tcp_listen_drops", before.ListenDrops, after.ListenDrops},
	} {
		if c.after > c.before {
			moved = append(moved, fmt.Sprintf("%s rose %s → %s (+%s)", c.name,
				Thousands(int(c.before)), Thousands(int(c.after)), Thousands(int(c.after-c.before))))
		}
	}
	return moved
}

// ev adds a line of evidence.
func (c *diagCase) ev(format string, a ...any) {
	c.d.Evidence = append(c.d.Evidence, fmt.Sprintf(format, a...))
}

// harness: client commands the harness could not start, its own limit.
func (c *diagCase) harness() bool {
	if c.f.class != result.OutcomeStart {
		return false
	}
	n, errno := harnessLimited(c.pt)
	if n == 0 {
		return false
	}
	c.d.Limit = "harness"
	c.d.Summary = fmt.Sprintf("the harness could not start %s client commands (%s): its own limit on this machine, not the server's", Thousands(n), errno)
	c.d.Suggestion = "raise the harness's limits (ulimit -u, -n), pace launches with --connect-rate or spread the clients over more machines"
	return true
}

// generators: a wall of the load generators' hosts, not the server's.
func (c *diagCase) generators() bool {
	g := generatorLimited(c.pt, c.f)
	if g == nil {
		return false
	}
	g.Evidence = append(c.d.Evidence, g.Evidence...)
	c.d = g
	return true
}

// atMaxClients: the server refused clients "at capacity" because its
// --max-clients is below the count attempted.
func (c *diagCase) atMaxClients() bool {
	f, pt := c.f, c.pt
	// A client command that says its server refused it at capacity.
	refusedAtCap := f.class == result.OutcomeRefused || (f.class == result.OutcomeExit && saysAtCapacity(pt, f.class))
	if !refusedAtCap || c.maxClients <= 0 || pt.Clients <= c.maxClients {
		return false
	}
	c.d.Limit = "max-clients"
	c.d.Summary = fmt.Sprintf("the server refused %s clients \"at capacity\": --max-clients %s is below the %s attempted",
		Thousands(f.count), Thousands(c.maxClients), Thousands(pt.Clients))
	if f.class == result.OutcomeRefused {
		c.ev("server refused %s, peak %s active", Thousands(pt.Server.Refused), Thousands(pt.Server.PeakActive))
	}
	c.d.Suggestion = "raise the server's --max-clients"
	return true
}

// mapGuard: the server's own map guard refused clients before the
// limit (server.mapGuard); its refusal names the count it saw.
func (c *diagCase) mapGuard() bool {
	m := mapGuardRE.FindStringSubmatch(c.f.text)
	if m == nil {
		return false
	}
	held, _ := strconv.Atoi(m[1])
	limit, _ := strconv.Atoi(m[2])
	busy, _ := strconv.Atoi(m[3])
	c.d.Limit = "vm.max_map_count"
	c.d.Summary = fmt.Sprintf("%s; the server process held %s mappings of vm.max_map_count %s, with %s more being created, and refused clients to leave the rest to the Go runtime",
		c.failedAt, Thousands(held), Thousands(limit), Thousands(busy))
	if role, maps := mostMaps(c.pt); maps > 0 {
		c.ev("peak mappings sampled in the %s process: %s", role, Thousands(maps))
	}
	c.d.Suggestion = mapLessAdvice
	return true
}

const mapLessAdvice = "map less per client (on rxe: per-client mode maps 4 rings per client, --mode shared-cq or pool 2, --mode srq 1) or raise vm.max_map_count"

// mapCount: memory mappings, the per-process limit the per-client
// layout hits.
func (c *diagCase) mapCount() bool {
	role, maps := mostMaps(c.pt)
	limit := c.before.MaxMapCount
	if limit <= 0 || maps < int(float64(limit)*0.95) || (c.f.errno != "ENOMEM" && c.f.errno != "") {
		return false
	}
	c.d.Limit = "vm.max_map_count"
	c.d.Summary = fmt.Sprintf("%s; %s process had %s mappings of vm.max_map_count %s",
		c.failedAt, role, Thousands(maps), Thousands(int(limit)))
	c.ev("peak mappings of the %s process: %s (vm.max_map_count %s)", role, Thousands(maps), Thousands(int(limit)))
	c.d.Suggestion = mapLessAdvice
	return true
}

// openFiles: the server's RLIMIT_NOFILE.
func (c *diagCase) openFiles() bool {
	pt := c.pt
	acceptEMFILE := 0
	for e, n := range pt.Server.Errors {
		if strings.Contains(e, "too many open files") {
			acceptEMFILE += n
		}
	}
	nofile := c.before.NoFile
	if nofile <= 0 || !(c.peak.ServerFDs >= int(nofile)-16 || acceptEMFILE > 0 || c.f.errno == "EMFILE") {
		return false
	}
	c.d.Limit = "rlimit-nofile"
	c.d.Summary = fmt.Sprintf("%s; the server had %s open files of RLIMIT_NOFILE %s",
		c.failedAt, Thousands(c.peak.ServerFDs), Thousands(int(nofile)))
	if acceptEMFILE > 0 {
		c.ev("server accept failed %s times: too many open files", Thousands(acceptEMFILE))
	}
	c.ev("peak server fds %s, RLIMIT_NOFILE %s", Thousands(c.peak.ServerFDs), Thousands(int(nofile)))
	c.d.Suggestion = fmt.Sprintf("raise the open-file limit (ulimit -n, LimitNOFILE=) above %s", Thousands(int(nofile)))
	if !pt.Server.Detached && pt.Target == nil {
		c.d.Suggestion += ", or run the server with --detach (no socket held per connected client)"
	}
	return true
}

// deviceCap: a device cap, when the failing verb's resource reached it,
// or locked memory when registering memory failed with ENOMEM.
func (c *diagCase) deviceCap() bool {
	cp, ok := capOfVerb[c.f.verb]
	if !ok {
		return false
	}
	limit := c.before.DeviceCaps[cp[0]]
	held, src := inUse(c.pt, cp[1])
	if cp[1] == "ah" && limit > 0 && held < int(limit) {
		// The kernel's resource tracking counts no AHs: the server holds
		// one per connected client, and clients on its device hold one
		// each towards it, so the device's AHs run out at half max_ah.
		held, src = c.pt.Connected, "the server"
		if 2*held+2 >= int(limit) {
			c.d.Limit = "device-cap:max_ah"
			c.d.Summary = fmt.Sprintf("%s; %s clients hold %s AHs (one on the server's side, one on their own) of max_ah %s when both ends share the device",
				c.failedAt, Thousands(held), Thousands(2*held), Thousands(int(limit)))
			c.ev("AHs: %s server-side, as many client-side if the clients share the device; device max_ah: %s", Thousands(held), Thousands(int(limit)))
			c.d.Suggestion = fmt.Sprintf("the device allows %s AHs: %s", Thousands(int(limit)), fewerPerClient["ah"])
			return true
		}
	}
	if limit > 0 && held >= int(limit) {
		c.d.Limit = "device-cap:" + cp[0]
		c.d.Summary = fmt.Sprintf("%s; %s held %s %ss of %s %s",
			c.failedAt, src, Thousands(held), strings.ToUpper(cp[1]), cp[0], Thousands(int(limit)))
		c.ev("%s in use at peak: %s; device %s: %s", cp[1], Thousands(held), cp[0], Thousands(int(limit)))
		advice := fewerPerClient[cp[1]]
		if advice == "" {
			advice = "use a device with a larger " + cp[0]
		}
		c.d.Suggestion = fmt.Sprintf("the device allows %s %ss: %s", Thousands(int(limit)), strings.ToUpper(cp[1]), advice)
		return true
	}
	if memlock := c.before.MemlockBytes; cp[1] == "mr" && c.f.errno == "ENOMEM" && memlock > 0 {
		c.d.Limit = "memlock"
		c.d.Summary = fmt.Sprintf("%s; RLIMIT_MEMLOCK is %s bytes",
			c.failedAt, Thousands(int(memlock)))
		c.ev("RLIMIT_MEMLOCK %s bytes", Thousands(int(memlock)))
		c.d.Suggestion = "raise the locked-memory limit (ulimit -l, LimitMEMLOCK=infinity)"
		return true
	}
	return false
}

// lostConnection holds the failure classes a connection the listen queue
// never passed on can end in: at connect, TLS or the exchange, a
// deadline, or a client command's own exit or signal, whose cause the
// harness cannot see.
var lostConnection = map[string]bool{
	result.OutcomeTCPConnect: true, result.OutcomeTLS: true, result.OutcomeExchange: true,
	result.OutcomeTimeout: true, result.OutcomeExit: true, result.OutcomeSignal: true,
}

// listenBacklog: the listen queue, when it overflowed during the point
// and the clients failed in a way a lost connection explains. A failure
// that names a verbs call got past the queue, whatever its class.
func (c *diagCase) listenBacklog() bool {
	f := c.f
	overflows := c.after.ListenOverflows - c.before.ListenOverflows
	drops := c.after.ListenDrops - c.before.ListenDrops
	if (overflows <= 0 && drops <= 0) || cmClients(c.pt) || !lostConnection[f.class] || f.verb != "" {
		return false
	}
	c.d.Limit = "listen-backlog"
	queue := fmt.Sprintf("the listen queue overflowed %s times", Thousands(int(overflows)))
	if overflows <= 0 {
		queue = fmt.Sprintf("the listen queue dropped %s connection requests", Thousands(int(drops)))
	}
	if c.before.Somaxconn > 0 {
		queue = fmt.Sprintf("%s (somaxconn %s)", queue, Thousands(int(c.before.Somaxconn)))
	}
	c.d.Summary = c.failedAt + "; " + queue + " during the point"
	c.d.Suggestion = backlogAdvice(c.pt)
	return true
}

// cmEvents: what the CM events of rdma_cm clients say plainly.
func (c *diagCase) cmEvents() bool { return cmDiagnosis(c.pt, c.f, c.d) }

// serverError: a server command that printed errors while its clients
// failed; its own words are the best evidence there is, kept even when
// they do not explain the failure.
func (c *diagCase) serverError() bool {
	t, f := c.pt.Target, c.f
	if t == nil || len(t.Errors) == 0 || f.failed == 0 {
		return false
	}
	for _, l := range t.Errors {
		c.ev("the server printed: %s", l)
	}
	if f.class != result.OutcomeTimeout && f.class != result.OutcomeExit && f.class != result.OutcomeSignal {
		return false
	}
	c.d.Limit = "server-error"
	c.d.Summary = fmt.Sprintf("%s clients failed as %s while the server reported %s (%s)",
		Thousands(f.count), f.class, t.Errors[0], strings.Join(t.Errnos, ", "))
	c.d.Suggestion = "the server's own error, in its output above: look there before at this machine's limits"
	return true
}

// otherwise is the diagnosis when no limit explains the failure: a
// timeout, the point's own error, or unknown; nil when nothing failed.
func (c *diagCase) otherwise() *result.Diagnosis {
	f, d := c.f, c.d
	switch {
	case f.class == result.OutcomeTimeout:
		d.Limit = "timeout"
		d.Summary = fmt.Sprintf("%s clients hit their deadline", Thousands(f.count))
		if c.pt.Peak != nil {
			// Without samples the peak is unknown, not 0%.
			d.Summary += fmt.Sprintf("; peak host CPU %.0f%%", c.peak.HostCPU)
		}
		d.Suggestion = "raise --timeout, pace launches with --connect-rate, or give the server more CPU"
	case c.pt.Error != "":
		d.Limit = "point-error"
		d.Summary = c.pt.Error
		d.Suggestion = "see the point's error; the run kept what was collected"
	case f.failed == 0:
		return nil
	default:
		d.Limit = "unknown"
		d.Summary = c.failedAt + "; no limit in force was near its bound"
		d.Suggestion = "inspect the per-client errors in the run JSON"
	}
	return d
}

// saysAtCapacity reports whether most client commands failing as class
// said, in their output, that the server was at capacity.
func saysAtCapacity(pt result.Point, class string) bool {
	n, said := 0, 0
	for _, r := range pt.Records {
		if r.Outcome != class || r.Command == nil {
			continue
		}
		n++
		if strings.Contains(strings.ReplaceAll(strings.ToLower(r.Command.Tail+r.Error), "-", " "), "at capacity") {
			said++
		}
	}
	return n > 0 && 2*said > n
}

// harnessLimited counts client commands that could not be started for
// lack of the harness's own resources, and names the errno.
func harnessLimited(pt result.Point) (int, string) {
	n, errnos := 0, map[string]int{}
	for _, r := range pt.Records {
		if r.Command != nil && r.Command.HarnessLimit {
			n++
			errnos[r.Errno]++
		}
	}
	return n, argmax(errnos)
}

// mostMaps is the process with the most memory mappings at any sample.
func mostMaps(pt result.Point) (string, int) {
	role, maps := "server", 0
	for _, s := range pt.Samples {
		for _, p := range s.Procs {
			if p.Maps > maps {
				role, maps = p.Role, p.Maps
			}
		}
	}
	if strings.HasPrefix(role, "clients") {
		role = "load-generator " + role
	}
	return role, maps
}

// inUse is how many objects of kind the device held at the point's peak,
// and who counted them: the kernel's count for the device (baseline
// included), else the server's own fabric count (sim).
func inUse(pt result.Point, kind string) (int, string) {
	if p := pt.Peak; p != nil && p.RDMA != nil {
		return p.RDMA[kind] + p.Baseline[kind], "the device"
	}
	if n, ok := pt.Server.Resources[kind]; ok {
		return n, "the server's fabric"
	}
	return 0, ""
}

// CostObjects is the objects Cost divides among a point's clients: the
// server's share of the device's when the per-process split is known,
// else the whole device's (deviceWide: server and clients together).
func CostObjects(pt result.Point) (res map[string]int, deviceWide bool) {
	switch {
	case pt.Peak != nil && pt.Peak.ByRole["server"] != nil:
		return pt.Peak.ByRole["server"], false
	case pt.Server.Resources != nil:
		return pt.Server.Resources, false
	case pt.Peak != nil:
		return pt.Peak.RDMA, true
	}
	return nil, false
}

// Cost is the per-client resource cost of a point: the server's share of
// the device's objects when the per-process split is known, else the
// whole device (server and clients together), per connected client.
func Cost(pt result.Point) *result.Cost {
	if pt.Connected == 0 {
		return nil
	}
	n := float64(pt.Connected)
	c := &result.Cost{Clients: pt.Connected}
	res, _ := CostObjects(pt)
	if res == nil && (pt.Peak == nil || pt.Peak.ServerRSS == 0) {
		return nil
	}
	per := func(k string) float64 { return roundTo(float64(res[k])/n, 2) }
	c.QPs, c.CQs, c.MRs, c.PDs, c.AHs = per("qp"), per("cq"), per("mr"), per("pd"), per("ah")
	if c.AHs == 0 && pt.Server.PeakAHs > 0 {
		// On rxe: the kernel counts no AHs, the server counts its own.
		c.AHs = roundTo(float64(pt.Server.PeakAHs)/n, 2)
	}
	c.RegisteredMem = roundTo(float64(res["mr_bytes"])/n, 0)
	if pt.Peak != nil && pt.Peak.ServerRSS > 0 {
		// Growth over the server's first reading (up, no clients yet).
		c.ServerRSS = roundTo(float64(pt.Peak.ServerRSS-firstServerRSS(pt))/n, 0)
	}
	return c
}

func firstServerRSS(pt result.Point) uint64 {
	for _, s := range pt.Samples {
		for _, p := range s.Procs {
			if p.Role == "server" && p.RSS <= pt.Peak.ServerRSS {
				return p.RSS
			}
		}
	}
	return 0
}

func argmax(m map[string]int) string {
	best, n := "", 0
	for _, k := range sortedKeys(m) {
		if m[k] > n {
			best, n = k, m[k]
		}
	}
	return best
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// roundTo rounds a non-negative x to digits decimals.
func roundTo(x float64, digits int) float64 {
	f := 1.0
	for range digits {
		f *= 10
	}
	return float64(int64(x*f+0.5)) / f
}
