package sim

// InUse returns how many PDs, CQs, MRs, QPs, SRQs and AHs the device's
// contexts hold right now, keyed "pd", "cq", "mr", "qp", "srq" and "ah" (the names of
// `rdma resource show`): the counts the caps are enforced against. Tests compare it with a baseline to prove that every
// resource a client got was given back.
func (p *Provider) InUse() map[string]int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return map[string]int{"pd": p.nPD, "cq": p.nCQ, "mr": p.nMR, "qp": p.nQP, "srq": p.nSRQ, "ah": p.nAH}
}
