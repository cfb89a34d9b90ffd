package command

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"testing"
)

// TestMain lets the test binary serve as a helper program where sh has
// no tool for the job: COMMAND_HELPER=listen listens on a TCP port of
// 127.0.0.1, prints it, and holds it until its stdin ends. It is also a
// view's first step (Spec.OnlyDevice), on a fixture tree when
// COMMAND_VIEW_ROOT names one (view_linux_test.go).
func TestMain(m *testing.M) {
	EnterViewIfAsked()
	switch os.Getenv("COMMAND_HELPER") {
	case "":
		os.Exit(m.Run())
	case "listen":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("listening on port %d\n", l.Addr().(*net.TCPAddr).Port)
		bufio.NewReader(os.Stdin).ReadString(0) // until EOF
		l.Close()
		os.Exit(0)
	}
	os.Exit(2)
}
