package report

import (
	"strings"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/result"
)

// A run of commands names its server, clients, counting and binaries,
// and says which figures client commands cannot give.
func TestTargetSection(t *testing.T) {
	run := &result.Run{Backend: result.Backend{Name: "vm"}, Target: &result.Target{
		Server: []string{"{build}/capserver", "-p", "{port}"}, BuildCommand: []string{"make", "MAX_CLIENTS={n}"},
		Client: []string{"{build}/capclient", "-a", "{addr}"}, ClientStdin: "send Test\n", ClientOK: "^connected",
		Counting: "held", Device: "rxe1", Addr: "192.0.2.1", Binaries: map[string]string{"/usr/bin/prlimit": "ab12"}},
		Points: []result.Point{{Clients: 5, Target: &result.TargetPoint{Build: &result.Build{Dir: "/c/k1",
			Outputs: map[string]string{"capserver": "0123456789abcdef0123"}}}}}}
	m := NewModel(run)
	text := strings.Join(m.Target, "\n")
	for _, want := range []string{"`{build}/capserver -p {port}`, built once per client count with `make MAX_CLIENTS={n}`",
		"N at once: held", "Not measured for client commands", "spawning the client to its ok line",
		"SHA-256 of `/usr/bin/prlimit`: `ab12`", "`capserver` 0123456789abcdef", "RDMA device `rxe1`"} {
		if !strings.Contains(text, want) {
			t.Errorf("target section lacks %q:\n%s", want, text)
		}
	}
	if NewModel(&result.Run{}).Target != nil {
		t.Error("a run of rdmaprobe's own server has a target section")
	}
	if got := codeHTML("a `<b>` c"); got != "a <code>&lt;b&gt;</code> c" {
		t.Errorf("codeHTML = %q", got)
	}
}
