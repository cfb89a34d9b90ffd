package app

import (
	"go/build"
	"path"
	"slices"
	"testing"
)

// The fabrics, the server and the guest are reached only through runner
// and its packages (README, "Layout"): the CLI and the session import
// none of them, and runner itself, the parent's side, imports none of
// the code that runs in its children or in the guest.
func TestLayoutReachesThroughRunner(t *testing.T) {
	const mod = "github.com/rdmaprobe/rdmaprobe/"
	rules := map[string][]string{
		".":          {"fabric", "fabric/sim", "fabric/verbs", "server", "softroce"},
		"../session": {"fabric", "fabric/sim", "fabric/verbs", "server", "softroce"},
		"../runner":  {"runner/child", "runner/guestagent", "runner/vm", "runner/launch"},
	}
	for dir, banned := range rules {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pkg.Imports, mod+"result") {
			t.Fatalf("%s: imports %v, not read right", dir, pkg.Imports)
		}
		for _, b := range banned {
			if slices.Contains(pkg.Imports, mod+b) {
				t.Errorf("%s imports %s", path.Base(pkg.Dir), b)
			}
		}
	}
}
