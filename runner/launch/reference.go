package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rdmaprobe/rdmaprobe/command"
	"github.com/rdmaprobe/rdmaprobe/result"
	"github.com/rdmaprobe/rdmaprobe/runner"
	"github.com/rdmaprobe/rdmaprobe/runner/protocol"
	"github.com/rdmaprobe/rdmaprobe/softroce"
)

// freePort is a TCP port free on this host now, for the reference's
// perftest server to listen on for its client on a generator host: not
// perftest's fixed default, which a perftest someone left running, or a
// second run's reference, would hold.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("finding a free TCP port for perftest's server: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// perftestIterations is the bandwidth tool's count: at 4 KiB a real
// device sends them in well under a second, and more than perftest's
// 1000 give a steadier rate.
const perftestIterations = 5000

// SSH measures the data path to its hosts for the Local runner.
var _ runner.Referencer = (*SSH)(nil)

// PerftestArgv are a perftest tool's command lines for a pair whose
// server runs on this host and whose client runs on a generator host:
// the fabric's device, port and GID index on both sides (the same ones
// rdmaprobe's server and generators open), size-byte messages, the
// server listening on port, and the client dialling serverIP there.
func PerftestArgv(tool string, f protocol.Fabric, size, port int, serverIP string) (server, client []string) {
	argv := []string{tool, "-F"}
	if f.Device != "" {
		argv = append(argv, "-d", f.Device)
	}
	if f.Port > 0 {
		argv = append(argv, "-i", strconv.Itoa(f.Port))
	}
	argv = append(argv, "-x", strconv.Itoa(f.GIDIndex), "-p", strconv.Itoa(port),
		"-s", strconv.Itoa(size), "-n", strconv.Itoa(perftestIterations))
	server = argv
	client = append(append([]string(nil), argv...), serverIP)
	return server, client
}

// HasTool reports whether tool is on host's PATH in a session of the
// launcher, as `command -v` finds it; an error is SSH's, not the tool's
// absence.
func (s *SSH) HasTool(ctx context.Context, host, tool string) (bool, error) {
	out, err := s.run(ctx, host, nil, "if command -v "+shellQuote(tool)+" >/dev/null 2>&1; then echo yes; else echo no; fi")
	if err != nil {
		return false, err
	}
	switch strings.TrimSpace(out) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, fmt.Errorf("unexpected answer to command -v: %q", firstLine(out))
}

// DataPathReference runs perftest's bandwidth tool for op
// (softroce.DataPathTools) between this host, the server's, and each
// generator host in turn: the server here, the client on the host over
// SSH, both on f's device and GID index, with size-byte messages, the
// client dialling serverIP. A host without the tool on its PATH gets a
// reference that says so (Reference.Absent); a reference that fails
// records its error. Neither fails the run. out, if set, is told each
// figure.
func (s *SSH) DataPathReference(ctx context.Context, f protocol.Fabric, op string, size int, serverIP string, out io.Writer) []result.Reference {
	_, tool := softroce.DataPathTools(op)
	here, _ := os.Hostname()
	var refs []result.Reference
	for _, h := range s.hosts {
		ref := result.Reference{Tool: tool, Where: fmt.Sprintf("server host %s ↔ generator host %s", here, h.Name), When: result.ReferenceBefore}
		if port, err := freePort(); err != nil {
			ref.Error = err.Error()
		} else {
			server, client := PerftestArgv(tool, f, size, port, serverIP)
			ref.Command = strings.Join(client, " ")
			s.pairReference(ctx, h.Name, here, port, server, client, &ref)
		}
		if out != nil {
			switch {
			case ref.Error != "":
				fmt.Fprintf(out, "reference %s (%s): %s\n", tool, ref.Where, ref.Error)
			default:
				fmt.Fprintf(out, "reference %s %d B %s: %.0f msg/s, %.2f MB/s\n", tool, size, ref.Where, ref.Figures["msg/s"], ref.Figures["BW average"])
			}
		}
		refs = append(refs, ref)
	}
	return refs
}

// pairReference runs server here and client on host, filling ref.
func (s *SSH) pairReference(ctx context.Context, host, here string, port int, server, client []string, ref *result.Reference) {
	tool := server[0]
	if _, err := exec.LookPath(tool); err != nil {
		ref.Absent, ref.Error = true, fmt.Sprintf("server host %s has no %s: no reference across that path", here, tool)
		return
	}
	has, err := s.HasTool(ctx, host, tool)
	if err != nil {
		ref.Error = fmt.Sprintf("looking for %s on %s: %v", tool, host, err)
		return
	}
	if !has {
		ref.Absent, ref.Error = true, fmt.Sprintf("%s has no %s: no reference across that path", host, tool)
		return
	}
	output, err := runPerftestPair(ctx, port, server, func(ctx context.Context) (string, error) {
		return s.run(ctx, host, nil, shellJoin(client...))
	})
	ref.Output = output
	if err != nil {
		ref.Error = err.Error()
		return
	}
	figs, err := softroce.ParsePerftest(output)
	if err != nil {
		ref.Error = err.Error()
		return
	}
	if figs["MsgRate"] > 0 {
		figs["msg/s"] = figs["MsgRate"] * 1e6
	}
	ref.Figures = figs
}

// runPerftestPair starts server on this host, waits until it listens on
// port, then runs client and returns the client's output; the
// server, which ends when its client has, is given a few seconds more
// and then ended.
func runPerftestPair(ctx context.Context, port int, server []string, client func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if command.TCPListening(port) {
		return "", fmt.Errorf("TCP port %d is taken on this host", port)
	}
	srvCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(srvCtx, server[0], server[1:]...)
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !command.TCPListening(port) {
		select {
		case err := <-exited:
			return "", fmt.Errorf("server on this host exited before it listened on port %d (%v): %s", port, err, command.LastLinesJoined(stderr.String(), 2, "; "))
		case <-ctx.Done():
			stop()
			<-exited
			return "", fmt.Errorf("server on this host not listening on port %d: %w", port, ctx.Err())
		case <-tick.C:
		}
	}
	out, cerr := client(ctx)
	if cerr != nil {
		stop() // it would wait for a client that is not coming
	}
	var serr error
	select {
	case serr = <-exited:
	case <-time.After(10 * time.Second):
		stop()
		serr = errors.Join(errors.New("did not end after its client"), <-exited)
	}
	if cerr != nil {
		return out, fmt.Errorf("client: %w", cerr)
	}
	if serr != nil {
		return out, fmt.Errorf("server on this host: %v: %s", serr, command.LastLinesJoined(stderr.String(), 2, "; "))
	}
	return out, nil
}
