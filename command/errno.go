package command

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

var errnoNameRE = regexp.MustCompile(`\bE[A-Z0-9]{2,15}\b`)

// errnoSet is the errno names, and their strerror texts ("Cannot
// allocate memory"), for programs that print perror(3) lines without
// the name, with a pattern matching the texts.
type errnoSet struct {
	names  map[string]bool
	texts  map[string]string // lower case, to names
	textRE *regexp.Regexp
}

// errnoTable is made at its first use: compiling its pattern at init
// cost every start of the binary, servers and load generators included,
// though most never read an errno.
var errnoTable = sync.OnceValue(func() errnoSet {
	t := errnoSet{names: map[string]bool{}, texts: map[string]string{}}
	for e := syscall.Errno(1); e < 134; e++ {
		if name := unix.ErrnoName(e); name != "" {
			t.texts[strings.ToLower(e.Error())] = name
			t.names[name] = true
		}
	}
	texts := make([]string, 0, len(t.texts))
	for text := range t.texts {
		texts = append(texts, regexp.QuoteMeta(text))
	}
	// Longest first, so "no such file or directory" is not read as a
	// shorter text inside it.
	sort.Slice(texts, func(i, j int) bool { return len(texts[i]) > len(texts[j]) })
	t.textRE = regexp.MustCompile(`(?i)` + strings.Join(texts, "|"))
	return t
})

// Errnos returns the errno names a program's output mentions, by name
// (ENOMEM) or by strerror text (Cannot allocate memory), in order of
// first appearance, each once.
func Errnos(out string) []string {
	type hit struct {
		at   int
		name string
	}
	var hits []hit
	t := errnoTable()
	for _, m := range errnoNameRE.FindAllStringIndex(out, -1) {
		if name := out[m[0]:m[1]]; t.names[name] {
			hits = append(hits, hit{m[0], name})
		}
	}
	for _, m := range t.textRE.FindAllStringIndex(out, -1) {
		hits = append(hits, hit{m[0], t.texts[strings.ToLower(out[m[0]:m[1]])]})
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
	var names []string
	seen := map[string]bool{}
	for _, h := range hits {
		if !seen[h.name] {
			seen[h.name] = true
			names = append(names, h.name)
		}
	}
	return names
}

// ErrorLines are the distinct lines of out that name an errno, at most
// max, and the errno names.
func ErrorLines(out string, max int) (lines, errnos []string) {
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		if names := Errnos(l); len(names) > 0 {
			seen[l] = true
			if len(lines) < max {
				lines = append(lines, l)
			}
			for _, n := range names {
				if !slices.Contains(errnos, n) {
					errnos = append(errnos, n)
				}
			}
		}
	}
	return lines, errnos
}
