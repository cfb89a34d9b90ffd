package server

import (
	"context"
	"errors"
	"net"
	"time"
)

// Serve accepts clients until ctx ends, then releases every client's
// resources and the device. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	var acceptErr error
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				if errors.Is(err, syscallEMFILE) || errors.Is(err, syscallENFILE) {
					// Out of descriptors: note it and keep serving those
					// already connected rather than dying, backing off
					// (as net/http does) instead of spinning.
					s.fail("accept", err)
					backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
					select {
					case <-time.After(backoff):
					case <-ctx.Done():
					}
					continue
				}
				acceptErr = err
			}
			break
		}
		backoff = 0
		s.mu.Lock()
		s.stats.Accepted++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
	cancel()
	if s.shared != nil {
		s.shared.stop()
	}
	s.wg.Wait()
	// No handler is left to adopt a client: stop the departure watch and
	// release the srq-mode clients still connected.
	s.hangups.Close()
	if s.shared != nil {
		for _, c := range s.shared.clients() {
			c.release()
		}
	}
	s.readers.Wait()
	s.teardown()
	return acceptErr
}
