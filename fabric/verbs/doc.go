// Package verbs is the libibverbs implementation of the fabric interfaces:
// real protection domains, CQs, MRs, SRQs and RC QPs on an RDMA device (mlx5,
// efa, rxe/Soft-RoCE ...).
//
// The one import from outside fabric/ is payload/payload.h: the C fast
// loops (echo.c, ping.c) check a message's payload without a return to Go.
//
// The cgo code is built only with the "verbs" build tag (and cgo), since it
// needs libibverbs-dev's headers; without the tag the package still builds,
// Supported reports false and New returns a provider that says the binary
// lacks verbs. runner/verbsbin builds (and caches) a tagged binary for
// the code that launches one.
//
// The Go files are one per verbs object, as in fabric/sim. All the C is in
// shim.h and shim.c: small helpers for what cgo cannot call directly
// (macros, structs built in C) or should not allocate in Go. A cgo file
// only includes shim.h, so the C never grows inside a Go file.
//
// Waiting for completions costs neither a spinning core nor an OS thread per
// waiter: each open device has one completion channel whose fd sits in Go's
// netpoller, and one goroutine turns its events into wake-ups of the CQ
// they belong to, so thousands of goroutines can each block in fabric.Await.
package verbs
