package result

// designUD is the connectionless server design (server.ModeUD).
const designUD = "ud"

// CheckPSNs checks the PSNs of every connected client in points.
func CheckPSNs(points []Point) PSNCheck {
	type pair struct{ local, remote uint32 }
	pairs := map[pair]int{}
	values := map[uint32]int{}
	var c PSNCheck
	type qp struct {
		proc int
		qpn  uint32
	}
	for _, p := range points {
		if p.Design == designUD {
			// A UD QP has no connection: the server issues no PSN, every
			// reply carries 0, and pairs would repeat as the clients'
			// own PSNs do by chance.
			continue
		}
		// The logical clients of one QP (mux mode) share its connection
		// and so its PSNs: the QP counts once.
		shared := map[qp]bool{}
		for _, r := range p.Records {
			if _, cm := r.PhasesUS[PhaseEstablish]; r.Outcome != OutcomeOK || r.Command != nil || cm {
				continue // a client command's PSNs are its own, an rdma_cm connection's the kernel's: unseen
			}
			if r.Logical != 0 {
				if shared[qp{r.Proc, r.LocalQPN}] {
					continue
				}
				shared[qp{r.Proc, r.LocalQPN}] = true
			}
			c.Connections++
			pairs[pair{r.LocalPSN, r.RemotePSN}]++
			values[r.LocalPSN]++
			values[r.RemotePSN]++
		}
	}
	c.DistinctPairs = len(pairs)
	c.DuplicatePairs = c.Connections - len(pairs)
	c.Unique = c.DuplicatePairs == 0
	draws := 0
	for _, n := range values {
		draws += n
		if n > 1 {
			c.RepeatedPSNs += n - 1
		}
	}
	// Expected repeats among k uniform draws from m values:
	// k - m·(1 - (1-1/m)^k) ≈ k²/2m for k ≪ m.
	const m = 1 << 24
	k := float64(draws)
	c.ExpectedRepeats = k * k / (2 * m)
	return c
}
