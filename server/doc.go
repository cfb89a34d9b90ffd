// Package server is the secure verbs server under test: a TLS 1.3 listener
// that, per admitted client, creates an RC QP, exchanges {QPN, PSN, GID,
// LID, MTU}, moves the QP RESET→INIT→RTR→RTS by hand and echoes self-checking
// payloads over SEND/RECV until the client leaves. Client N+1 is refused
// with an explicit "at capacity" reply.
//
// # Resource modes
//
// The mode decides what each client costs the server. Besides the counts
// of verbs objects, on rxe every CQ ring and every QP's send and receive
// ring is a memory mapping of the server process, and vm.max_map_count
// (65,530 by default) bounds those: per-client mode meets it near 16k
// clients. Per client (N = --max-clients, M = --msg-size, G = clients per
// group = min(⌊max_cqe/2⌋, N), D = receive buffers per SRQ = min(max(2·G,
// MinSRQDepth = 64), Config.SRQDepth or DefaultSRQDepth = 1024,
// max_srq_wr)):
//
//	mode        per client                   fixed, shared by the clients                rxe mappings per client
//	per-client  1 QP + 2 CQ + 2 MR (M bytes)  —                                           4: 2 CQ rings, SQ, RQ
//	shared-cq   1 QP + 2 MR (M bytes)         2 CQ per group of G                         2: SQ, RQ
//	pool        1 QP                          2 CQ per group; 1 MR of 2·N·M               2: SQ, RQ
//	srq         1 QP without RQ               2 CQ + 1 SRQ per group; 1 MR of ⌈N/G⌉·D·M   1: SQ
//	ud          1 AH                          2 CQ + 1 UD QP per group of G' = ⌊max_cqe/4⌋; 0
//	                                          1 MR of 4·N·(M+40)
//	mux         1/K of a QP + 2 CQ + 2 MR     —                                           4/K
//
// (mux: K = Config.Mux logical clients share each QP, whose MRs hold
// K·Depth messages; see mux.go.)
//
// All modes also hold 1 PD; a group's rings add 2 mappings (3 with its
// SRQ) for up to G clients. Groups are created as clients arrive and kept
// until the server stops; the pool is registered at start, so
// registrations do not grow with clients: in pool mode a send and a
// receive slot per client (2·N·M pinned whether or not the clients come:
// 2000 clients of 4 KiB, 16 MiB), in srq mode D buffers per group (one
// group up to 16,383 clients on rxe: 1024 × 4 KiB = 4 MiB).
//
// # How a connected client is served
//
// per-client and shared-cq (the layout of a server that creates its
// resources per connection, such as testdata/capserver): a
// goroutine per client runs the echo loop (await a receive, post a free
// buffer as a receive in its place, send the echo from the buffer it
// landed in, verify it while it goes; with all Config.Depth echoes in
// flight, await a send first) until the client leaves; its stack, grown by the TLS handshake, is most of what such a
// client costs in server memory besides its buffers.
// Busy-polled (Config.BusyPoll) on verbs, per-client mode's loop runs in
// C, one cgo call per stretch of messages (fabric.Echoer, echoloop.go).
//
// ud (ud.go): connectionless. A group's UD QP receives every client's
// datagrams and sends every echo through the client's address handle;
// the receive router finds the client by the datagram's source QPN and
// GID. A lost datagram is the clients' to count (result.OutcomeLost).
// rxe's max_ah (32,767 per device) bounds the clients: one AH per
// client on the server's side, and as many on the clients' when they
// share its device.
//
// pool, srq and ud: no goroutine per client. The handler returns once the
// client is connected, and the group's CQ routers run the echo; the
// client's departure (the hangup watcher) releases it, and Serve's
// shutdown stops the watcher and releases the clients still connected.
// A client's mutex serialises its completions with its release. A payload
// that fails verification, or a failed echo, ends the client (a "message"
// failure), as in the other modes.
//
// # Detached clients
//
// By default a client's TLS connection lives as long as the client, and
// its end (EOF, reset, or any byte) is the departure: one socket, so one
// open file, per connected client. With Config.Detach (serve --detach)
// the server answers the hello with exchange.Detached and closes the
// connection once that is written; the client closes its end too, and
// when it leaves it sends a goodbye over its QP (a self-checking header
// whose sequence is payload.Bye), waits for the RC acknowledgement, then
// destroys the QP. The server releases the client on the goodbye, in
// every mode, and counts no failure. What it gives up: a client that
// dies without a goodbye keeps its QP and slot until the server stops
// (or an echo to it fails), since an RC responder learns nothing of a
// peer that went silent.
//
// A goodbye the server's device acknowledged is in a CQ, and counts as
// a goodbye even when the server stops before handling it: Serve stops
// the shared-CQ routers first, which handle what their CQs hold, and a
// handler ended by the stop looks for a goodbye already received.
//
// pool: the receive router verifies the message in the client's receive
// slot and, if the client's send slot is free, copies it there, reposts
// the receive and sends; otherwise the message stays in the receive slot
// until the send router sees the previous echo complete (an echo's send
// completion may be routed after the next message's receive), and the
// client's next message waits (RNR) meanwhile.
//
// srq: the group's receive router takes each receive completion,
// finds the client by WC.QPN and the SRQ buffer by WC.WRID, verifies the
// payload there and sends the echo out of that same buffer (no copy);
// the send router returns the buffer to the SRQ when the echo's send
// completes. Release destroys the QP, then returns the buffers of the
// client's echoes in flight to the SRQ; every buffer posting carries a
// generation in its wrID, so a completion that surfaces after release
// took its buffer back is recognised as stale.
//
// The SRQ buffers are sized to what can be in flight, not to N: a client
// has one message outstanding during its round trips and none once
// connected, and a load generator has --inflight attempts in progress. A
// message that finds its SRQ empty is answered RNR by the responder, and
// the client's QP retries until a buffer is posted (rnr_retry 7 =
// forever): it waits, it does not fail. A client holds at most
// QPMaxSendWR + 2 buffers (echoes in flight and verified messages waiting
// for a send slot, since an echo's send completion may be routed after
// the next message's receive); one that sends more without taking its
// echoes is dropped. An authenticated client that posts no receive for
// its echoes holds QPMaxSendWR buffers until it leaves. A buffer the
// device took for a message that never completed, because the client
// left mid-message and its QP was destroyed, may yield no completion at
// all (the verbs promise none after destroy): it is not reposted before
// the server stops.
//
// # Traffic: depth and the remote buffer
//
// The traffic phase (client.TrafficConfig) keeps up to Config.Depth
// messages outstanding per client. Each client QP then takes
// max(Depth, 2) sends and receives, groups hold ⌊max_cqe/that⌋ clients,
// and the echo buffers are Depth of each kind: per-client and shared-cq
// register 2 MRs of Depth·M, the pool is 2·N·Depth·M, and in srq mode a
// client may hold Depth echoes in flight plus max(2, Depth) waiting for a
// send slot, and an SRQ holds up to Depth buffers per client of its
// group (the runner asks for that many in a traffic phase: with fewer,
// messages beyond them wait out RNR timers). With Config.Remote (serve --remote) every mode also
// registers, at start, one buffer of N·Depth·M with remote write and
// read: a client's slice of it is in its accept (exchange.Remote), its
// QP allows RDMA WRITE and READ, and each of its slots starts filled
// with payload.RegionSeq(the client's QPN, slot) for READs to verify.
// One-sided operations cost the server no CPU and no completion: only
// its device serves them.
//
// # PSNs and hellos: what stays unique, in bounded memory
//
// A server may run for days (serve), so nothing it keeps grows with the
// clients it has served. Its PSNs come from a counter run through a
// permutation of the 24-bit PSN space keyed from crypto/rand (psn.go):
// no PSN repeats among the first 2^24 the server issues, and no one
// without the key can tell the next. After 2^24 the server draws a new
// key and starts another epoch (ServerStats.PSNEpochs counts them);
// across epochs a PSN may come back, but never while a connected client
// holds it. Memory: the key, the counter and the PSNs of the connected
// clients.
//
// A hello names an endpoint (QPN, PSN, GID, LID); the same hello while
// its client is being set up or connected is refused as replayed. Once
// the client has left, its endpoint is forgotten: what a replay could
// reach then is a QP that no longer exists.
//
// What each mode costs when measured (verbs objects, mappings and memory
// per client) and what detaching saves are in docs/resource-modes.md,
// with the commands that produced the figures.
package server
