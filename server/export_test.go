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

// MuxRoundTrips is each logical client's messages the server has counted
// (mux mode), by its client QP's number and its logical ID.
func (s *Server) MuxRoundTrips() map[[2]uint32]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[[2]uint32]uint64{}
	for k, m := range s.muxes {
		m.mu.Lock()
		for id, l := range m.members {
			out[[2]uint32{k.QPN, id}] = l.next - 1
		}
		m.mu.Unlock()
	}
	return out
}
