// Package server is the secure verbs server under test: a TLS 1.3 listener
// that, per admitted client, creates an RC QP (or, in ud mode, an address
// handle), exchanges {QPN, PSN, GID, LID, MTU}, moves the QP
// RESET→INIT→RTR→RTS by hand and echoes self-checking payloads until the
// client leaves. Client N+1 is refused with an explicit "at capacity" reply.
//
// Config.Mode decides what a client costs the server, and so where it
// breaks; docs/server.md describes how each mode serves its clients, and
// docs/resource-modes.md what each costs, measured.
package server
