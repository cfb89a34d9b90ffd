package result

// DesignModes are the server designs a run measured in turns, nil for a
// run of one design (Config.Designs).
func (r *Run) DesignModes() []string {
	if len(r.Config.Designs) < 2 {
		return nil
	}
	return r.Config.Designs
}

// PointDesign is the server design pt ran in run: its own, or, in runs
// of one design and those before schema version 5, the run's.
func (r *Run) PointDesign(pt Point) string {
	if pt.Design != "" {
		return pt.Design
	}
	return r.Config.ResourceMode
}

// ForDesign is run as if it had measured mode alone: its points, its
// search and diagnosis, its point cut short if that was mode's, and the
// data-path references of its transport (TransportOf). Reports
// and checks written for a run of one design read each design of a run
// of several through it. The copy shares what it does not filter with
// run.
func (r *Run) ForDesign(mode string) *Run {
	c := *r
	c.Config.ResourceMode, c.Config.Designs, c.Designs = mode, nil, nil
	c.Points = []Point{}
	for _, p := range r.Points {
		if r.PointDesign(p) == mode {
			c.Points = append(c.Points, p)
		}
	}
	if p := r.Interrupted; p != nil && r.PointDesign(*p) != mode {
		c.Interrupted = nil
	}
	c.Environment.DataPath = nil
	for _, ref := range r.Environment.DataPath {
		if ref.Transport == TransportOf(mode) {
			c.Environment.DataPath = append(c.Environment.DataPath, ref)
		}
	}
	if len(r.Designs) > 0 {
		c.Search, c.Diagnosis = nil, nil
		for _, d := range r.Designs {
			if d.Mode == mode {
				c.Search, c.Diagnosis = d.Search, d.Diagnosis
			}
		}
		c.PSN = CheckPSNs(c.Points)
	}
	return &c
}
