package parts

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands for a test: it keeps what Missing asked of it.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skip(args ...any)                  { r.skip = fmt.Sprint(args...) }

func TestMissingSkipsUnlessRequired(t *testing.T) {
	t.Setenv(Env, "")
	r := &recorder{}
	Missing(r, "%s not installed", "rping")
	if r.skip != "rping not installed" || r.fatal != "" {
		t.Errorf("without %s: skip %q, fatal %q", Env, r.skip, r.fatal)
	}
	t.Setenv(Env, "1")
	r = &recorder{}
	Missing(r, "%s not installed", "rping")
	if !strings.HasPrefix(r.fatal, "rping not installed (") || r.skip != "" {
		t.Errorf("with %s=1: skip %q, fatal %q", Env, r.skip, r.fatal)
	}
}
