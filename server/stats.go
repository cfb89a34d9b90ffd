package server

import (
	"errors"

	"github.com/rdmaprobe/rdmaprobe/fabric"
	"github.com/rdmaprobe/rdmaprobe/result"
)

// Stats returns a copy of the server's counters.
func (s *Server) Stats() result.ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Failures = copyMap(s.stats.Failures)
	st.Errors = copyMap(s.stats.Errors)
	st.MapCounts = s.maps.counts()
	_, st.PSNEpochs = s.psns.stats()
	if s.stats.Resources != nil {
		st.Resources = copyMap(s.stats.Resources)
	}
	if c, ok := s.dev.(fabric.CounterReader); ok {
		st.DeviceCounters = c.Counters()
	}
	return st
}

func copyMap(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (s *Server) fail(class string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Failures[class]++
	if len(s.stats.Errors) < 50 || s.stats.Errors[err.Error()] > 0 {
		s.stats.Errors[err.Error()]++
	}
}

// goodbye counts a client released on its goodbye.
func (s *Server) goodbye() {
	s.mu.Lock()
	s.stats.Goodbyes++
	s.mu.Unlock()
}

// ended counts why a client's echo ended: a goodbye, or a message
// failure (nil: it did not end).
func (s *Server) ended(err error) {
	if errors.Is(err, errBye) {
		s.goodbye()
	} else if err != nil {
		s.fail(result.OutcomeMessage, err)
	}
}
