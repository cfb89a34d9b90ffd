package command

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestErrorLines(t *testing.T) {
	out := "server DISCONNECT EVENT...\nrdma_create_qp: Invalid argument\nsetup_qp failed: -1\nrdma_create_qp: Invalid argument\naccept: Too many open files (EMFILE)\n"
	lines, errnos := ErrorLines(out, 5)
	if !reflect.DeepEqual(lines, []string{"rdma_create_qp: Invalid argument", "accept: Too many open files (EMFILE)"}) ||
		!reflect.DeepEqual(errnos, []string{"EINVAL", "EMFILE"}) {
		t.Errorf("errorLines = %q, %q", lines, errnos)
	}
	var many strings.Builder
	for i := range 10 {
		fmt.Fprintf(&many, "client %d: Invalid argument\n", i)
	}
	if lines, _ := ErrorLines(many.String(), 3); len(lines) != 3 {
		t.Errorf("%d lines kept, want at most 3", len(lines))
	}
}
