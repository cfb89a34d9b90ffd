package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdmaprobe/rdmaprobe/live"
)

// liveFlags are search's and ramp's views of a run while it happens.
func liveFlags() []cli.Flag {
	return []cli.Flag{
		metricsAddrFlag("serve each point's live metrics (Prometheus/OpenMetrics) at /metrics on this `HOST:PORT` from the run's start to its end (docs/metrics.md)"),
		&cli.DurationFlag{Name: "metrics-linger", Usage: "keep --metrics-addr up this long after the run ends, so that a last scrape sees the final point"},
		&cli.StringFlag{Name: "events", Usage: "write the run's events as JSON lines to `FILE` (- = stdout; the human output then goes to stderr) (docs/events.md)"},
	}
}

func metricsAddrFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "metrics-addr", Usage: usage}
}

// liveViews are a run's --metrics-addr and --events, nil when off.
type liveViews struct {
	metrics *live.Metrics
	events  *live.Events
	file    *os.File
	linger  time.Duration
}

// openLive binds --metrics-addr and opens --events before the run starts,
// so that a bad address or path fails first. With --events -, the
// human output moves to stderr: s is updated.
func openLive(c *cli.Context, s *Streams) (*liveViews, error) {
	v := &liveViews{linger: c.Duration("metrics-linger")}
	if v.linger < 0 {
		return nil, fail(ExitUsage, "--metrics-linger %v: want 0 or more", v.linger)
	}
	if v.linger > 0 && c.String("metrics-addr") == "" {
		return nil, fail(ExitUsage, "--metrics-linger needs --metrics-addr")
	}
	switch p := c.String("events"); p {
	case "":
	case "-":
		v.events = live.NewEvents(s.Out)
		s.Out = s.Err
	default:
		f, err := os.Create(p)
		if err != nil {
			return nil, fail(ExitUsage, "--events: %v", err)
		}
		v.file, v.events = f, live.NewEvents(f)
	}
	if a := c.String("metrics-addr"); a != "" {
		m, err := live.Listen(a)
		if err != nil {
			v.closeFile()
			return nil, fail(ExitUsage, "%v", err)
		}
		v.metrics = m
		// Printed before the first point, so that a scraper can be
		// pointed at it while the run goes, and :0's port is known.
		fmt.Fprintf(s.Out, "metrics: http://%s/metrics\n", m.Addr())
	}
	return v, nil
}

func (v *liveViews) closeFile() error {
	if v.file == nil {
		return nil
	}
	return v.file.Close()
}

// close ends the views once the run is over: the endpoint after the
// linger (or at ctx's end), the events file at once.
func (v *liveViews) close(ctx context.Context, out io.Writer) error {
	err := v.closeFile()
	if v.metrics != nil && v.linger > 0 {
		fmt.Fprintf(out, "metrics: %s/metrics stays up for %v\n", v.metrics.Addr(), v.linger)
	}
	if e := v.metrics.Close(ctx, v.linger); err == nil {
		err = e
	}
	if e := v.events.Err(); err == nil && e != nil {
		err = fmt.Errorf("--events: %w", e)
	}
	return err
}
