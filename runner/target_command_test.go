package runner

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestErrorLines(t *testing.T) {
	out := "server DISCONNECT EVENT...\nrdma_create_qp: Invalid argument\nsetup_qp failed: -1\nrdma_create_qp: Invalid argument\naccept: Too many open files (EMFILE)\n"
	lines, errnos := errorLines(out, 5)
	if !reflect.DeepEqual(lines, []string{"rdma_create_qp: Invalid argument", "accept: Too many open files (EMFILE)"}) ||
		!reflect.DeepEqual(errnos, []string{"EINVAL", "EMFILE"}) {
		t.Errorf("errorLines = %q, %q", lines, errnos)
	}
	var many strings.Builder
	for i := range 10 {
		fmt.Fprintf(&many, "client %d: Invalid argument\n", i)
	}
	if lines, _ := errorLines(many.String(), 3); len(lines) != 3 {
		t.Errorf("%d lines kept, want at most 3", len(lines))
	}
}

func TestServerCommandCheck(t *testing.T) {
	good := ServerCommand{Argv: []string{"srv", "-p", "{port}", "-n", "{max}", "{build}/x"}, Build: []string{"make", "N={n}", "OUT={build}"}}
	if err := good.Check(); err != nil {
		t.Errorf("good command: %v", err)
	}
	for _, bad := range []ServerCommand{
		{},
		{Argv: []string{"srv", "{i}"}},
		{Argv: []string{"srv"}, Build: []string{"make", "{port}"}},
		{Argv: []string{"srv"}, Ready: "("},
		{Argv: []string{"srv"}, Port: 70000},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if g := (&ServerCommand{}).grace(); g != 10*time.Second {
		t.Errorf("default grace %v", g)
	}
}
