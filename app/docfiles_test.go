package app

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	// codePath is a backquoted path inside the repository: a first
	// segment that is one of its top-level entries, then more segments.
	codePath = regexp.MustCompile("`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.*-]+)+/?)`")
	// runDir is a saved run's directory as results/README.md names it.
	runDir = regexp.MustCompile("`(20[0-9]{6}T[0-9]{6}Z-[a-z-]+)`")
)

// Every file that the README, docs/ and results/README.md name exists:
// Markdown links relative to the page, backquoted paths relative to the
// repository's root (a glob may stand for several), and the saved runs'
// directories that results/README.md lists.
func TestDocFilesExist(t *testing.T) {
	pages := append(docFiles(t), "../results/README.md")
	top := map[string]bool{}
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		top[e.Name()] = true
	}
	exists := func(p string) bool {
		m, _ := filepath.Glob(p)
		return len(m) > 0
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if !exists(filepath.Join(filepath.Dir(page), target)) {
				t.Errorf("%s links to %s, which does not exist", page, target)
			}
		}
		for _, m := range codePath.FindAllStringSubmatch(text, -1) {
			p := m[1]
			if !top[strings.SplitN(p, "/", 2)[0]] || strings.ContainsAny(p, "<>{}") {
				continue
			}
			checked++
			if !exists(filepath.Join("..", strings.TrimSuffix(p, "/"))) {
				t.Errorf("%s names %s, which does not exist", page, p)
			}
		}
		if filepath.Base(filepath.Dir(page)) == "results" {
			for _, m := range runDir.FindAllStringSubmatch(text, -1) {
				checked++
				if !exists(filepath.Join("..", "results", m[1])) && !exists(filepath.Join("..", "results", "*", m[1])) {
					t.Errorf("%s names the run %s, which is not under results/", page, m[1])
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d names of files in %v", checked, pages)
	}
}

// Nothing in the repository's Go comments or its front pages points
// outside it (a document it does not have, a discussion a reader cannot
// see) or carries a calendar date: dated figures belong in
// results/README.md with their command.
func TestNoPointersOutside(t *testing.T) {
	outside := regexp.MustCompile(`(?i)\b` + outsideWords + `|\bthe issue\b`)
	date := regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`)
	for _, page := range docFiles(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if m := outside.FindString(string(b)); m != "" {
			t.Errorf("%s says %q", page, m)
		}
	}
	files := 0
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "results") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		for _, g := range f.Comments {
			text := g.Text()
			if m := outside.FindString(text); m != "" {
				t.Errorf("%s: a comment says %q", p, m)
			}
			if m := date.FindString(text); m != "" {
				t.Errorf("%s: a comment carries the date %s (figures go to results/README.md)", p, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Errorf("read the comments of %d Go files, want the repository's", files)
	}
}

// outsideWords names, as a pattern built from parts so that this file
// does not itself say them, the project that came before this one and the
// design notes kept beside the repository.
var outsideWords = "pre" + "decessor|" + "DESIGN" + `\.md`

// Tests and fixtures name no outside document either: the name of an
// earlier project or a path out of the repository means nothing to a
// reader of a clean clone.
func TestFixturesPointNowhereOutside(t *testing.T) {
	outside := regexp.MustCompile(`(?i)\b` + outsideWords + `|\.\./` + "sha" + `red\b|\bseeds/`)
	self, err := filepath.Abs("docfiles_test.go")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata")) {
			return nil
		}
		if abs, _ := filepath.Abs(p); abs == self {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		if m := outside.FindString(string(b)); m != "" {
			t.Errorf("%s says %q", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Errorf("read %d test files and fixtures, want the repository's", files)
	}
}

// A first-time user finds, on the first screen (24 lines) of its
// section, how to probe a server of their own and what the exit statuses
// of a gate are.
func TestREADMEFirstScreens(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	screen := func(heading string) string {
		for i, l := range lines {
			if l == heading {
				end := min(i+24, len(lines))
				return strings.Join(lines[i:end], "\n")
			}
		}
		t.Fatalf("README has no section %q", heading)
		return ""
	}
	for _, c := range []struct{ heading, want string }{
		{"## Probe your own server and client", "--server-cmd '"},
		{"## Probe your own server and client", "--client-cmd '"},
		{"## A capacity gate in CI", "--require 500"},
		{"## A capacity gate in CI", "<!-- exit:end -->"},
	} {
		if !strings.Contains(screen(c.heading), c.want) {
			t.Errorf("the first 24 lines of %q lack %q", c.heading, c.want)
		}
	}
}
