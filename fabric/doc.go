// Package fabric is the seam between rdmaprobe's server/client and the thing
// that provides queue pairs. It mirrors libibverbs (device, PD, MR, SRQ, CQ,
// RC and UD QPs, manual RESET→INIT→RTR→RTS, posts and polls) so the cgo
// implementation in fabric/verbs and the pure-Go one in fabric/sim are
// interchangeable under the server and client.
//
// A file holds one concern: device.go the device model, pd.go and qp.go the
// objects, cq.go completions, poll.go the polling policy, errors.go the
// errors (a failed verb carries its name and errno, so outcomes can record
// "ibv_create_qp: ENOMEM"), echo.go and ping.go the loops a provider may run
// itself.
//
// fabric/ imports nothing of rdmaprobe outside fabric/ and internal/, so the
// layers above can change without touching it (fabric/verbs names its one
// exception).
package fabric
