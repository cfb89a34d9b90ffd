package runner

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// DefaultCalibration is how long a point measures the machine's speed
// before and after its clients run: ~30 handshakes in the TCG guest,
// ~500 on this host.
const DefaultCalibration = 250 * time.Millisecond

// calibration measures the machine's speed with the run's own
// certificates and key exchange (certs.HandshakeRate), in this process.
type calibration struct {
	window   time.Duration
	srv, cli *tls.Config
}

func newCalibration(spec Spec, pairs certs.Pairs) (*calibration, error) {
	window := spec.CalibrationWindow
	if window < 0 {
		return nil, nil
	}
	if window == 0 {
		window = DefaultCalibration
	}
	spair, cpair := pairs.Server, pairs.Client
	srv, err := spair.Server(cpair.CertPEM)
	if err != nil {
		return nil, err
	}
	cli, err := certs.Client(spair.CertPEM, cpair)
	if err != nil {
		return nil, err
	}
	for _, c := range []*tls.Config{srv, cli} {
		if err := certs.SetKeyExchange(c, spec.TLSKex); err != nil {
			return nil, err
		}
	}
	return &calibration{window: window, srv: srv, cli: cli}, nil
}

// measure takes one reading, 0 if it failed: a failure is kept as the
// calibration's error, never the point's.
func (c *calibration) measure(ctx context.Context, cal *result.Calibration) float64 {
	rate, err := certs.HandshakeRate(ctx, c.srv, c.cli, c.window)
	if err != nil && cal.Error == "" {
		cal.Error = err.Error()
	}
	return rate
}
