package analysis

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// memoryAdvice is what to do about the memory wall.
const memoryAdvice = "give the machine more memory (on the vm backend --vm-mem, up to what the host has free) or spend less per client: the report's projected walls give each process's bytes per client"

// oomKilled: the kernel's OOM killer ended processes during the point
// (/proc/vmstat oom_kill rose): the machine's memory, whichever process
// it picked, is what stopped the point.
func (c *diagCase) oomKilled() bool {
	k := c.pt.KernelMemory
	if k == nil || k.OOMKills == 0 {
		return false
	}
	c.d.Limit = "memory"
	what := fmt.Sprintf("the kernel ran out of memory: its OOM killer killed %s during the point", Thousands(int(k.OOMKills))+" "+plural(int(k.OOMKills), "process", "processes"))
	if who := killedBy(c.pt, "signal: killed"); who != "" {
		what += " (" + who + ")"
	}
	if c.f.failed > 0 {
		what = c.failedAt + "; " + what
	}
	c.d.Summary = what
	c.ev("/proc/vmstat oom_kill rose by %s during the point", Thousands(int(k.OOMKills)))
	for _, l := range k.OOMLog {
		c.ev("the kernel said: %s", l)
	}
	c.memoryEvidence()
	c.d.Suggestion = memoryAdvice
	return true
}

// allocFailure: an allocation the machine's memory refused, not a limit
// of the process's: the Go runtime out of memory, a fork or mmap with
// ENOMEM, or a verb's ENOMEM while the machine had next to no memory
// available (the map count, the map guard and the device's caps, which
// also answer ENOMEM, are tried before).
func (c *diagCase) allocFailure() bool {
	text := strings.ToLower(c.pt.Error + "\n" + c.pt.Server.ExitError)
	said := ""
	for _, s := range []string{"out of memory", "cannot allocate memory"} {
		if strings.Contains(text, s) {
			said = s
		}
	}
	_, verb := capOfVerb[c.f.verb]
	low, lowWhen := memoryLow(c.pt.KernelMemory)
	asked, over := askedOver(c.f.text, c.pt.KernelMemory)
	if said == "" && !(verb && c.f.errno == "ENOMEM" && (low || over)) {
		return false
	}
	c.d.Limit = "memory"
	switch {
	case said != "" && c.f.failed > 0:
		c.d.Summary = fmt.Sprintf("%s; an allocation failed (%s): %s", c.failedAt, said, firstLine(c.pt.Error, c.pt.Server.ExitError))
	case said != "":
		c.d.Summary = fmt.Sprintf("an allocation failed (%s): %s", said, firstLine(c.pt.Error, c.pt.Server.ExitError))
	case low:
		c.d.Summary = fmt.Sprintf("%s; the machine had %s of memory available when the verbs failed", c.failedAt, bytesText(lowWhen))
	default:
		c.d.Summary = fmt.Sprintf("%s; the verb asked for %s, more than the %s the machine had available", c.failedAt, bytesText(asked), bytesText(c.pt.KernelMemory.Before["MemAvailable"]))
	}
	c.memoryEvidence()
	c.d.Suggestion = memoryAdvice
	return true
}

// memoryEvidence states the machine's memory before, at full load and
// after the point, and the kernel's own share's growth.
func (c *diagCase) memoryEvidence() {
	k := c.pt.KernelMemory
	if k == nil {
		return
	}
	for _, r := range []struct {
		when string
		m    map[string]uint64
	}{{"before the point", k.Before}, {"with the clients held", k.Loaded}, {"after", k.After}} {
		if r.m == nil {
			continue
		}
		c.ev("MemAvailable %s of MemTotal %s %s; the kernel's slab, vmalloc, page tables and stacks %s",
			bytesText(r.m["MemAvailable"]), bytesText(r.m["MemTotal"]), r.when, bytesText(result.KernelHeld(r.m)))
	}
}

// memoryLow reports whether the machine's available memory fell below
// 5% of its total at full load or after the point, and the lowest
// reading.
func memoryLow(k *result.KernelMemory) (bool, uint64) {
	if k == nil {
		return false, 0
	}
	low, lowest := false, uint64(0)
	for _, m := range []map[string]uint64{k.Loaded, k.After} {
		if m == nil || m["MemTotal"] == 0 {
			continue
		}
		if a := m["MemAvailable"]; a*20 < m["MemTotal"] {
			if !low || a < lowest {
				lowest = a
			}
			low = true
		}
	}
	return low, lowest
}

// bytesRE reads the size a verb's error names ("ibv_reg_mr: ENOMEM
// (cannot allocate memory): 805306368 bytes").
var bytesRE = regexp.MustCompile(`\b(\d+) bytes\b`)

// askedOver is the size the failing verb's error names and whether it
// was more than the machine had available before the point.
func askedOver(text string, k *result.KernelMemory) (uint64, bool) {
	m := bytesRE.FindStringSubmatch(text)
	if m == nil || k == nil || k.Before["MemAvailable"] == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	return n, err == nil && n > k.Before["MemAvailable"]
}

// killedBy names the process of the point whose end text has sig: the
// server's or a load generator's, from the point's error.
func killedBy(pt result.Point, sig string) string {
	for _, s := range []string{pt.Server.ExitError, pt.Error} {
		if strings.Contains(s, sig) {
			return s
		}
	}
	return ""
}

func firstLine(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			l, _, _ := strings.Cut(s, "\n")
			return l
		}
	}
	return ""
}

// bytesText is a byte count in MiB or GiB, for a sentence.
func bytesText(b uint64) string {
	if b >= 10<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%s MiB", Thousands(int(b>>20)))
}
