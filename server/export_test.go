package server

import "slices"

// SRQBuffers counts the srq-mode receive buffers over all groups: how
// many are posted to their SRQ, and how many there are. Once no client
// is connected every buffer must be posted again.
func (s *Server) SRQBuffers() (posted, total int) {
	if s.shared == nil || s.shared.pool == nil {
		return 0, 0
	}
	s.shared.mu.Lock()
	groups := slices.Clone(s.shared.groups)
	s.shared.mu.Unlock()
	for _, g := range groups {
		g.bufMu.Lock()
		for _, b := range g.bufs {
			total++
			if b.state == bufPosted {
				posted++
			}
		}
		g.bufMu.Unlock()
	}
	return posted, total
}
