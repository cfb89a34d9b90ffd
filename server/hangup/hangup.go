// Package hangup tells when peers leave: it watches many idle TCP
// connections with one epoll instance and one goroutine, where a goroutine
// blocked in Read per connection would cost a goroutine stack each (tens
// of thousands of clients hold their connection open after the exchange
// and send nothing more until they go).
//
// A connection counts as gone when it becomes readable or hung up: EOF,
// a reset, or any byte (after the exchange a client has nothing to say;
// a TLS close_notify is such a byte).
package hangup

import (
	"errors"
	"syscall"
)

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("hangup: watcher closed")

// Conn is what Watch needs of a connection (net.TCPConn has it).
type Conn interface {
	SyscallConn() (syscall.RawConn, error)
}
