package server

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

func TestMapHeadroom(t *testing.T) {
	for limit, want := range map[int]int{65530: 256, 1000: 20, 100: 16, 262144: 256} {
		if got := mapHeadroom(limit); got != want {
			t.Errorf("mapHeadroom(%d) = %d, want %d", limit, got, want)
		}
	}
}

// The guard refuses with ENOMEM from ibv_create_qp once this process is
// within the headroom of the limit, and lets clients through far from it.
func TestMapGuard(t *testing.T) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	now := bytes.Count(b, []byte{'\n'})
	if err := (&mapGuard{}).check(); err != nil {
		t.Errorf("no limit known: %v", err)
	}
	far := &mapGuard{limit: now + 10000}
	for i := 0; i < 100; i++ {
		if err := far.check(); err != nil {
			t.Fatalf("client %d refused %d mappings from the limit: %v", i, 10000, err)
		}
	}
	// Within 512 of the limit it counts at once; 10 mappings left is
	// inside the headroom (16).
	near := &mapGuard{limit: now + 10}
	err = near.check()
	var ve *fabric.VerbError
	if !errors.As(err, &ve) || ve.Verb != "ibv_create_qp" || ve.Errno != syscall.ENOMEM {
		t.Fatalf("near the limit: %v, want ibv_create_qp ENOMEM", err)
	}
	tight := &mapGuard{limit: now}
	if err := tight.check(); err == nil {
		t.Error("at the limit: admitted")
	}
}
