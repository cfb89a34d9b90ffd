package command

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Split breaks a command line into argv the way a POSIX shell splits
// words, and does nothing else: no variables, globs, pipes or
// redirections (write `sh -c '…'` for those). Single quotes are literal;
// in double quotes a backslash escapes only $ ` " \ and newline; outside
// quotes it escapes any character.
func Split(s string) ([]string, error) {
	var (
		argv  []string
		cur   strings.Builder
		word  bool // cur holds a word, even an empty one ('')
		quote byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0:
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, word = c, true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("command ends with a lone backslash")
			}
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				word = true
			}
		case c == ' ' || c == '\t' || c == '\n':
			if word {
				argv = append(argv, cur.String())
				cur.Reset()
				word = false
			}
		default:
			cur.WriteByte(c)
			word = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if word {
		argv = append(argv, cur.String())
	}
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	return argv, nil
}

// Expand replaces each {name} in argv with vars[name]. A name that vars
// lacks is an error naming it and the known ones, so a typo fails before
// anything runs. {{ and }} stand for literal braces; a brace not followed
// by a name (awk's `{ print }`) or after a $ (a shell's `${x}`) is
// literal as is.
func Expand(argv []string, vars map[string]string) ([]string, error) {
	out := make([]string, len(argv))
	for i, a := range argv {
		s, err := expandOne(a, vars)
		if err != nil {
			return nil, fmt.Errorf("argument %d (%q): %w", i, a, err)
		}
		out[i] = s
	}
	return out, nil
}

// Placeholders returns the {names} argv uses, sorted and each once.
func Placeholders(argv []string) []string {
	seen := map[string]bool{}
	for _, a := range argv {
		for i := 0; i < len(a); i++ {
			if a[i] == '{' && i+1 < len(a) && a[i+1] == '{' {
				i++
				continue
			}
			if i > 0 && a[i-1] == '$' {
				continue
			}
			if name, n := placeholderAt(a, i); n > 0 {
				seen[name] = true
				i += n - 1
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func expandOne(a string, vars map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(a); i++ {
		c := a[i]
		if (c == '{' || c == '}') && i+1 < len(a) && a[i+1] == c {
			b.WriteByte(c)
			i++
			continue
		}
		if c == '{' && (i == 0 || a[i-1] != '$') {
			if name, n := placeholderAt(a, i); n > 0 {
				v, ok := vars[name]
				if !ok {
					return "", fmt.Errorf("unknown placeholder {%s} (known: %s)", name, known(vars))
				}
				b.WriteString(v)
				i += n - 1
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// placeholderAt reports the name of a {name} starting at a[i] and its
// length in bytes, or 0.
func placeholderAt(a string, i int) (string, int) {
	if a[i] != '{' {
		return "", 0
	}
	j := i + 1
	for j < len(a) && (a[j] == '_' || a[j] >= 'a' && a[j] <= 'z' || a[j] >= 'A' && a[j] <= 'Z' || j > i+1 && a[j] >= '0' && a[j] <= '9') {
		j++
	}
	if j == i+1 || j >= len(a) || a[j] != '}' {
		return "", 0
	}
	return a[i+1 : j], j - i + 1
}

func known(vars map[string]string) string {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, "{"+k+"}")
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// Unescape interprets the backslash escapes of printf(1) in s: \n \t \r
// \\ \a \b \f \v \" \', \xHH and \0NNN (octal). It lets a one-line flag
// carry several lines of stdin, as `--client-stdin 'send Test\nquit\n'`.
func Unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("trailing backslash")
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case '\\', '"', '\'':
			b.WriteByte(c)
		case 'x':
			j := i + 1
			for j < len(s) && j < i+3 && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				return "", fmt.Errorf(`\x without hex digits at byte %d`, i-1)
			}
			v, _ := strconv.ParseUint(s[i+1:j], 16, 8)
			b.WriteByte(byte(v))
			i = j - 1
		case '0':
			j := i + 1
			for j < len(s) && j < i+4 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v := uint64(0)
			if j > i+1 {
				v, _ = strconv.ParseUint(s[i+1:j], 8, 16)
			}
			if v > 255 {
				return "", fmt.Errorf(`octal escape \0%s is above 255`, s[i+1:j])
			}
			b.WriteByte(byte(v))
			i = j - 1
		default:
			return "", fmt.Errorf(`unknown escape \%c at byte %d`, c, i-1)
		}
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// SplitProgram splits a command flag's line (Split) and checks its
// program before anything starts: a program that is missing or not executable is the
// operator's mistake, said in one line. A program named through a
// placeholder ({build}/server) exists only once built.
func SplitProgram(flag, s string) ([]string, error) {
	argv, err := Split(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	prog := argv[0]
	if strings.Contains(prog, "{") {
		return argv, nil
	}
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		// Commands run in each point's own directory: a program named
		// relative to here must keep meaning this one.
		if argv[0], err = filepath.Abs(prog); err != nil {
			return nil, err
		}
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", flag, prog, lookErr(argv[0], err))
	}
	return argv, nil
}

func lookErr(prog string, err error) string {
	if fi, serr := os.Stat(prog); serr == nil {
		if fi.IsDir() {
			return "is a directory"
		}
		return "not executable"
	}
	if strings.Contains(prog, "/") {
		return "no such file"
	}
	return "not found in $PATH"
}

// Programs lists the host programs command templates name: each
// argv[0] (looked up in $PATH) and every argument that is an absolute
// path to an executable file. Arguments with placeholders ({build}/srv)
// exist only once built and are copied then.
func Programs(argvs ...[]string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, argv := range argvs {
		for i, a := range argv {
			if strings.Contains(a, "{") {
				continue
			}
			var p string
			switch {
			case i == 0:
				lp, err := exec.LookPath(a)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", a, err)
				}
				if p, err = filepath.Abs(lp); err != nil {
					return nil, err
				}
			case filepath.IsAbs(a):
				if fi, err := os.Stat(a); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
					continue
				}
				p = a
			default:
				continue
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}
