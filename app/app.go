// Package app is rdmaprobe's command line: the urfave/cli App is built by
// New from the streams it uses, so tests run whole commands in-process.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/internal/clihelp"
	"github.com/rdmaprobe/rdmaprobe/runner/guestagent"
)

// Version is set at build time with -ldflags "-X ...app.Version=...".
var Version = "dev"

// Streams are the process's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// exitError carries an exit code with a one-line message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// New builds the App.
func New(s Streams) *cli.App {
	app := &cli.App{
		Name:    "rdmaprobe",
		Usage:   "measure how many concurrent RDMA clients a verbs server really holds",
		Version: Version,
		Description: "rdmaprobe starts a secure verbs server for N clients, ramps N real clients at it,\n" +
			"searches the largest N that still connects at the target success rate, and saves\n" +
			"every run as versioned JSON under results/.\n\n" + exitHelp(),
		Reader:    s.In,
		Writer:    s.Out,
		ErrWriter: s.Err,
		// Errors are printed once, by Main, as one line.
		ExitErrHandler:       func(*cli.Context, error) {},
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		Commands: []*cli.Command{
			searchCommand(s),
			rampCommand(s),
			serveCommand(s),
			clientsCommand(s),
			hostinfoCommand(s),
			benchCommand(s),
			reportCommand(s),
			compareCommand(s),
		},
	}
	clihelp.Categorize(app, categorized, groups())
	onUsageErrors(app)
	keepOldNames(app.Commands, "", s)
	return app
}

// Main runs the App with args and returns the process exit code.
func Main(args []string, s Streams) int {
	command.EnterViewIfAsked() // returns unless this process starts a target in a view
	if guestagent.InGuest() {
		guestagent.Run() // never returns: it powers the guest off
	}
	return MainContext(context.Background(), args, s)
}

// MainContext is Main under ctx: cancelling it is Ctrl-C.
func MainContext(ctx context.Context, args []string, s Streams) int {
	app := New(s)
	err := app.RunContext(ctx, flagsFirst(app, args))
	if err == nil {
		return 0
	}
	code := ExitRunError
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) && ce.ExitCode() != 0 {
		code = ce.ExitCode()
	}
	msg := strings.TrimSpace(err.Error())
	if msg != "" {
		fmt.Fprintln(s.Err, "rdmaprobe: "+strings.ReplaceAll(msg, "\n", "; "))
	}
	return code
}
