package collectors

import (
	"os"
	"reflect"
	"testing"
)

// The rping fixtures were dumped in the guest with `rping -s -P` (pid
// 105) serving two `rping -c` clients (processes 115 and 116) on rxe1.
// rping creates a connection's objects from a thread: the server's
// threads 120 and 121, the clients' 109 and 108.
var rpingTgid = map[int]int{105: 105, 120: 105, 121: 105, 115: 115, 109: 115, 116: 116, 108: 116}

func rpingDumps(t *testing.T) map[string][]byte {
	t.Helper()
	dumps := map[string][]byte{}
	for _, k := range TreeKinds {
		data, err := os.ReadFile("testdata/rdma_rping_" + k + ".json")
		if err != nil {
			t.Fatal(err)
		}
		dumps[k] = data
	}
	return dumps
}

func TestCountForProcesses(t *testing.T) {
	dumps := rpingDumps(t)
	tgid := func(tid int) int { return rpingTgid[tid] }
	server, err := CountForProcesses(dumps, "rxe1", []int{105}, tgid)
	if err != nil {
		t.Fatal(err)
	}
	// Per connection, one QP, CQ, PD and 3 MRs (16+16+64 bytes), and an
	// rdma_cm ID; plus the listener's context, PD and ID.
	want := map[string]int{"qp": 2, "cq": 2, "mr": 6, "mr_bytes": 192, "pd": 3, "srq": 0, "ctx": 1, "cm_id": 3}
	if !reflect.DeepEqual(server, want) {
		t.Errorf("server tree\n got %v\nwant %v", server, want)
	}
	clients, err := CountForProcesses(dumps, "rxe1", []int{115, 116}, tgid)
	if err != nil {
		t.Fatal(err)
	}
	if clients["qp"] != 2 || clients["ctx"] != 2 || clients["mr"] != 8 || clients["pd"] != 4 || clients["cm_id"] != 2 {
		t.Errorf("clients %v", clients)
	}
	// Another device, or a process not in the tree, counts nothing; the
	// kernel's own GSI QP and PD (no pid) are never a process's.
	if m, _ := CountForProcesses(dumps, "rxe0", []int{105}, tgid); m["qp"] != 0 || m["pd"] != 0 {
		t.Errorf("rxe0: %v", m)
	}
	if m, _ := CountForProcesses(dumps, "rxe1", []int{999}, tgid); m["qp"] != 0 || m["cm_id"] != 0 {
		t.Errorf("stranger: %v", m)
	}
	if _, err := CountForProcesses(map[string][]byte{"qp": []byte("{")}, "rxe1", nil, tgid); err == nil {
		t.Error("malformed dump: no error")
	}
}

func TestParseCMListening(t *testing.T) {
	data, err := os.ReadFile("testdata/rdma_rping_cm_id.json")
	if err != nil {
		t.Fatal(err)
	}
	for port, want := range map[int]bool{7174: true, 52793: false, 717: false} {
		if got, err := ParseCMListening(data, port); err != nil || got != want {
			t.Errorf("port %d: %v, %v; want %v", port, got, err, want)
		}
	}
	if ok, _ := ParseCMListening([]byte(`[{"state":"LISTEN","src-addr":"[::]:4791"}]`), 4791); !ok {
		t.Error("IPv6 listener not seen")
	}
	if _, err := ParseCMListening([]byte("not json"), 1); err == nil {
		t.Error("malformed dump: no error")
	}
}

func TestParsePPid(t *testing.T) {
	for stat, want := range map[string]int{
		"105 (rping) S 1 105 105 0 -1 4194560":         1,
		"120 (a (b) c) R 105 105 105 0 -1 4194560 1 2": 105,
		"garbage": 0,
	} {
		if got := ParsePPid([]byte(stat)); got != want {
			t.Errorf("ParsePPid(%q) = %d, want %d", stat, got, want)
		}
	}
}
