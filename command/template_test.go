package command

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"rping -s -P -a 192.0.2.1 -p {port}", []string{"rping", "-s", "-P", "-a", "192.0.2.1", "-p", "{port}"}},
		{`sh -c 'ulimit -n 20; exec ./srv {port}'`, []string{"sh", "-c", "ulimit -n 20; exec ./srv {port}"}},
		{`echo "a \"b\" \$x \n" c\ d ''`, []string{"echo", `a "b" $x \n`, "c d", ""}},
		{"  a\t\tb\n", []string{"a", "b"}},
		{`a"b"'c'd`, []string{"abcd"}},
	}
	for _, c := range cases {
		got, err := Split(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "   ", `a 'b`, `a "b`, `a \`} {
		if got, err := Split(bad); err == nil {
			t.Errorf("Split(%q) = %q, want an error", bad, got)
		}
	}
}

func TestExpand(t *testing.T) {
	vars := Vars(300, 600, 4433, "/tmp/p1")
	got, err := Expand([]string{"srv", "-n{n}", "--max={max}", "{dir}/log", "awk", "{ print $1 }", "{{n}}", "${HOME}"}, vars)
	want := []string{"srv", "-n300", "--max=600", "/tmp/p1/log", "awk", "{ print $1 }", "{n}", "${HOME}"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Expand = %q, %v; want %q", got, err, want)
	}
	_, err = Expand([]string{"srv", "--port", "{prot}"}, vars)
	if err == nil || !strings.Contains(err.Error(), "{prot}") || !strings.Contains(err.Error(), "{port}") || !strings.Contains(err.Error(), "argument 2") {
		t.Errorf("unknown placeholder: err = %v, want one naming {prot}, the argument and the known {port}", err)
	}
	if p := Placeholders([]string{"a{n}{n}", "{{dir}}", "{port}x", "{ x }"}); !reflect.DeepEqual(p, []string{"n", "port"}) {
		t.Errorf("Placeholders = %v", p)
	}
}

func TestUnescape(t *testing.T) {
	cases := map[string]string{
		`send Test\nquit\n`: "send Test\nquit\n",
		`a\tb\\c\"\'`:       "a\tb\\c\"'",
		`\x41\x4a\x7`:       "AJ\x07",
		`\0101\0\07`:        "A\x00\x07",
		`plain`:             "plain",
	}
	for in, want := range cases {
		if got, err := Unescape(in); err != nil || got != want {
			t.Errorf("Unescape(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`a\`, `\q`, `\xg`, `\0777`} {
		if _, err := Unescape(bad); err == nil {
			t.Errorf("Unescape(%q): no error", bad)
		}
	}
}

func TestErrnos(t *testing.T) {
	cases := map[string][]string{
		"capserver: client 3: ibv_create_qp: Cannot allocate memory (ENOMEM)\n": {"ENOMEM"},
		"accept: Too many open files\nfork: Resource temporarily unavailable":   {"EMFILE", "EAGAIN"},
		"EXIT EOF ERROR ECHO_REQUEST":                                           nil,
		"open x: no such file or directory; then EACCES":                        {"ENOENT", "EACCES"},
	}
	for in, want := range cases {
		if got := Errnos(in); !reflect.DeepEqual(got, want) {
			t.Errorf("Errnos(%q) = %v, want %v", in, got, want)
		}
	}
}

// A command flag's program is checked before anything starts: missing,
// a directory or not executable is said in one line; a relative path is
// made absolute; a program named through a placeholder passes.
func TestSplitProgram(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{"nosuchprogram-x -a", "not found in $PATH"},
		{dir + "/missing", "no such file"},
		{dir, "is a directory"},
		{plain, "not executable"},
	} {
		if _, err := SplitProgram("--server-cmd", tc.line); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.line, err, tc.want)
		}
	}
	if argv, err := SplitProgram("--server-cmd", "{build}/srv -p {port}"); err != nil || argv[0] != "{build}/srv" {
		t.Errorf("placeholder: %q, %v", argv, err)
	}
	if argv, err := SplitProgram("--client-cmd", "true x"); err != nil || argv[0] != "true" {
		t.Errorf("true: %q, %v", argv, err)
	}
}
