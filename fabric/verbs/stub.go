//go:build !(verbs && cgo)

package verbs

import (
	"context"
	"errors"

	"github.com/rdmaprobe/rdmaprobe/fabric"
)

// errNotBuilt is what every device operation of a binary without verbs says.
var errNotBuilt = errors.New("this binary was built without libibverbs support (build with -tags verbs, or let runner/verbsbin build one)")

// Provider stands in for the libibverbs provider in binaries built without
// it; it lists no devices and opens none.
type Provider struct{}

var _ fabric.Provider = (*Provider)(nil)

// New returns a provider whose Devices and Open report that verbs support
// is not compiled in; check Supported first.
func New() fabric.Provider { return &Provider{} }

// Supported reports whether this binary was built with libibverbs.
func Supported() bool { return false }

// Name is the backend name recorded in results.
func (*Provider) Name() string { return "verbs" }

// Simulated is false: the backend, were it built in, measures real verbs.
func (*Provider) Simulated() bool { return false }

// Devices always fails: there is no libibverbs in this binary.
func (*Provider) Devices() ([]string, error) { return nil, errNotBuilt }

// Open always fails: there is no libibverbs in this binary.
func (*Provider) Open(context.Context, fabric.DeviceConfig) (fabric.Device, error) {
	return nil, errNotBuilt
}

// OpenCM says that this binary lacks librdmacm.
func OpenCM() (fabric.CM, error) {
	return nil, errors.New("this binary was built without librdmacm support (build with -tags verbs)")
}
