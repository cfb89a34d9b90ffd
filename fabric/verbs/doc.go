// Package verbs is the libibverbs implementation of the fabric interfaces:
// real protection domains, CQs, MRs, SRQs and RC QPs on an RDMA device (mlx5,
// efa, rxe/Soft-RoCE ...), and librdmacm's connection manager (fabric.CM,
// cm.go).
//
// An rdma_cm connection's QP is created by librdmacm (rdma_create_qp) on
// the caller's PD and CQs of librdmacm's own context of the device, which
// OpenCM's ids open as a Device, rather than a QP the caller made on a
// context of its own being connected by hand: librdmacm then makes every
// transition as for any rdma_cm client (cmtime's included), so connects/s
// compare like for like and no connect pays for three more calls and a
// CONNECT_RESPONSE round.
//
// payload.h is package payload's Fill and Check in C: the C fast loops
// (echo.c, ping.c) check a message's payload without a return to Go. It
// lives here, beside the only Go package that compiles it, so the build
// cache sees its changes and no include path names the checkout's
// directory.
//
// The cgo code is built only with the "verbs" build tag (and cgo), since it
// needs libibverbs-dev's and librdmacm-dev's headers; without the tag the package still builds,
// Supported reports false and New returns a provider that says the binary
// lacks verbs. runner/verbsbin builds (and caches) a tagged binary for
// the code that launches one.
//
// The Go files are one per verbs object, as in fabric/sim. All the C is in
// shim.h and shim.c (cm.h and cm.c for librdmacm): small helpers for what
// cgo cannot call directly (macros, structs built in C, unions) or should
// not allocate in Go. A cgo file only includes those headers, so the C
// never grows inside a Go file.
//
// Waiting for completions costs neither a spinning core nor an OS thread per
// waiter: each open device has one completion channel whose fd sits in Go's
// netpoller, and one goroutine turns its events into wake-ups of the CQ
// they belong to, so thousands of goroutines can each block in fabric.Await.
package verbs
