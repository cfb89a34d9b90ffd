package runner

import "github.com/rdmaprobe/rdmaprobe/result"

// hostProgress is each generator host's counts so far, nil when the
// generators run on this machine.
func (c *collection) hostProgress() []HostProgress {
	if c.remote == nil {
		return nil
	}
	index := map[string]int{}
	var out []HostProgress
	for i := range c.gens {
		h := c.remote.Host(i)
		j, ok := index[h]
		if !ok {
			j = len(out)
			index[h] = j
			out = append(out, HostProgress{Host: h})
		}
		out[j].Clients += share(c.n, len(c.gens), i)
		out[j].Done += c.st[i].progress.Done
		out[j].OK += c.st[i].progress.OK
	}
	return out
}

// hostPoints groups the point's generators by host (RemoteLauncher.Host)
// into each host's share: its clients' outcomes, how long its generators
// took from the release, the device and GID they opened, what they
// measured of themselves, and how the failed ones failed.
func (c *collection) hostPoints(r RemoteLauncher) []result.HostPoint {
	index := map[string]int{}
	var out []result.HostPoint
	for i := range c.gens {
		h := r.Host(i)
		j, ok := index[h]
		if !ok {
			j = len(out)
			index[h] = j
			out = append(out, result.HostPoint{Host: h, GIDIndex: -1, Addr: r.Addr(i)})
		}
		hp, st := &out[j], c.st[i]
		hp.Generators = append(hp.Generators, i)
		for _, rec := range st.recs {
			hp.Attempted++
			if rec.Outcome == result.OutcomeOK {
				hp.Connected++
			}
		}
		if ev := st.readyEv; ev != nil && ev.Device != nil && hp.Device == "" {
			hp.Device = ev.Device.Name
			hp.GID = ev.Device.Port.GID.String()
			hp.GIDIndex = ev.Device.Port.GIDIndex
		}
		if st.usage != nil {
			hp.Usage = append(hp.Usage, *st.usage)
		}
		if st.fault != nil {
			hp.Faults = append(hp.Faults, *st.fault)
		}
		if !st.doneAt.IsZero() && !c.released.IsZero() {
			hp.ConnectSec = max(hp.ConnectSec, st.doneAt.Sub(c.released).Seconds())
		}
	}
	for j := range out {
		hp := &out[j]
		if hp.Attempted > 0 {
			hp.SuccessRate = float64(hp.Connected) / float64(hp.Attempted)
		}
		if hp.ConnectSec > 0 {
			hp.ConnectRate = float64(hp.Connected) / hp.ConnectSec
		}
	}
	return out
}
