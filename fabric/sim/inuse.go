package sim

// InUse returns how many PDs, CQs, MRs and QPs the device's contexts hold
// right now, keyed "pd", "cq", "mr" and "qp": the counts the caps are
// enforced against. Tests compare it with a baseline to prove that every
// resource a client got was given back.
func (p *Provider) InUse() map[string]int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return map[string]int{"pd": p.nPD, "cq": p.nCQ, "mr": p.nMR, "qp": p.nQP}
}
