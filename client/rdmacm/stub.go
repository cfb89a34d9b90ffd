//go:build !(verbs && cgo)

package rdmacm

import (
	"context"
	"errors"

	"github.com/rdmaprobe/rdmaprobe/client"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Supported reports whether this binary was built with librdmacm.
func Supported() bool { return false }

// Conns are the connections Run made, held until Close.
type Conns struct{}

// Close disconnects and frees every connection.
func (*Conns) Close() {}

// Run says that this binary lacks rdma_cm.
func Run(context.Context, Config) ([]result.ClientRecord, *Conns, error) {
	return nil, nil, errors.New("this binary was built without librdmacm support (build with -tags verbs)")
}

// Watch returns at once: there are no connections.
func (*Conns) Watch(context.Context, func(result.ClientRecord)) {}

// Traffic says that this binary lacks rdma_cm.
func (*Conns) Traffic(context.Context, client.TrafficConfig, int) result.Traffic {
	return result.Traffic{Error: "this binary was built without librdmacm support (build with -tags verbs)"}
}
