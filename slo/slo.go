// Package slo is the grammar of the traffic phase's service-level
// objectives (--slo) and their evaluation against a point's figures. A
// point meets its SLOs when every one holds; the largest N that does is
// the run's "max sustainable" capacity, as k6 thresholds decide a load
// test's pass or fail from data rather than from eyeballing.
//
// Grammar (one objective; --slo takes a comma-separated list):
//
//	objective := metric op value
//	metric    := p50 | p90 | p99 | p99.9 | max | mean   latency of a message
//	           | errors                                 failed messages and clients
//	           | rate                                   aggregate verified messages/s
//	           | client-rate                            slowest client's messages/s
//	           | mbps                                   aggregate MB/s (10^6 bytes)
//	op        := <= | < | >= | > | =  (== reads as =)
//	value     := number unit        latency: ns, us (or µs), ms, s
//	           | number             errors, rate, client-rate, mbps
//	           | [number "*"] base  the same metric at the run's smallest N
//	           | [number "*"] peak  its best at any tested N up to this one
//
// An objective bounds its metric the way a better server moves it: a
// latency and errors from above (<=, <; errors also =0), a rate from
// below (>=, >). One that would pass a worse point and fail a better
// one, or could never hold, is refused when parsed.
//
// A reference (base, peak) takes each count's median over its trials,
// so one noisy trial does not move it.
//
// Examples: p99<=2ms, errors=0, rate>=0.8*base, rate>=0.9*peak,
// client-rate>=100.
// Spaces are allowed around the parts.
package slo

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Figures are what a point's traffic phase measured, the inputs of every
// objective.
type Figures struct {
	P50, P90, P99, P999, Max, Mean time.Duration
	// Errors counts failed messages (completion errors, timeouts,
	// payloads that did not verify) and clients that could not take part.
	Errors int64
	// Rate is verified messages per second, all clients together;
	// ClientRate the slowest client's; MBps the payload bytes per second
	// in 10^6 bytes.
	Rate, ClientRate, MBps float64
}

// metric is one measurable quantity.
type metric struct {
	name    string
	latency bool // value in ns, written with a unit
	integer bool
	lower   bool // lower is better: bounded from above
	get     func(Figures) float64
	set     func(*Figures, float64)
}

var metrics = []metric{
	{name: "p50", latency: true, lower: true, get: func(f Figures) float64 { return float64(f.P50) }, set: func(f *Figures, v float64) { f.P50 = time.Duration(v) }},
	{name: "p90", latency: true, lower: true, get: func(f Figures) float64 { return float64(f.P90) }, set: func(f *Figures, v float64) { f.P90 = time.Duration(v) }},
	{name: "p99", latency: true, lower: true, get: func(f Figures) float64 { return float64(f.P99) }, set: func(f *Figures, v float64) { f.P99 = time.Duration(v) }},
	{name: "p99.9", latency: true, lower: true, get: func(f Figures) float64 { return float64(f.P999) }, set: func(f *Figures, v float64) { f.P999 = time.Duration(v) }},
	{name: "max", latency: true, lower: true, get: func(f Figures) float64 { return float64(f.Max) }, set: func(f *Figures, v float64) { f.Max = time.Duration(v) }},
	{name: "mean", latency: true, lower: true, get: func(f Figures) float64 { return float64(f.Mean) }, set: func(f *Figures, v float64) { f.Mean = time.Duration(v) }},
	{name: "errors", integer: true, lower: true, get: func(f Figures) float64 { return float64(f.Errors) }, set: func(f *Figures, v float64) { f.Errors = int64(v) }},
	{name: "rate", get: func(f Figures) float64 { return f.Rate }, set: func(f *Figures, v float64) { f.Rate = v }},
	{name: "client-rate", get: func(f Figures) float64 { return f.ClientRate }, set: func(f *Figures, v float64) { f.ClientRate = v }},
	{name: "mbps", get: func(f Figures) float64 { return f.MBps }, set: func(f *Figures, v float64) { f.MBps = v }},
}

func metricNames() string {
	names := make([]string, len(metrics))
	for i, m := range metrics {
		names[i] = m.name
	}
	return strings.Join(names, ", ")
}

// ops in the order they are tried: two-character operators first.
var ops = []string{"<=", ">=", "<", ">", "="}

// SLO is one parsed objective.
type SLO struct {
	Metric string
	Op     string
	// Value is the bound: nanoseconds for latencies, the metric's own
	// unit otherwise; with a Ref it is the factor of the reference.
	Value float64
	// Ref is the figure Value multiplies: RefBase, RefPeak, or "" for
	// a bound of its own.
	Ref  string
	text string // as written, spaces removed
}

// References an objective's bound can be written against.
const (
	// RefBase is the same metric at the run's smallest N.
	RefBase = "base"
	// RefPeak is the metric's best at any tested N up to the point's
	// own (its highest rate, its lowest latency).
	RefPeak = "peak"
)

// Refs are the figures an objective written against a reference needs;
// nil where the run has none yet.
type Refs struct {
	Base, Peak *Figures
}

// String is the objective as written (without spaces).
func (s SLO) String() string { return s.text }

// Parse reads a comma-separated list of objectives. An empty string is no
// objective. Errors are one line naming the objective and what is wrong.
func Parse(list string) ([]SLO, error) {
	var out []SLO
	for _, part := range strings.Split(list, ",") {
		if strings.TrimSpace(part) == "" {
			if strings.TrimSpace(list) == "" {
				return nil, nil
			}
			return nil, fmt.Errorf("slo %q: empty objective in the list", list)
		}
		s, err := parseOne(part)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func parseOne(in string) (SLO, error) {
	text := strings.Join(strings.Fields(in), "")
	bad := func(format string, args ...any) (SLO, error) {
		return SLO{}, fmt.Errorf("slo %q: %s", text, fmt.Sprintf(format, args...))
	}
	var s SLO
	opAt := -1
	for _, op := range ops {
		if i := strings.Index(text, op); i >= 0 && (opAt < 0 || i < opAt) {
			opAt, s.Op = i, op
		}
	}
	if opAt < 0 {
		return bad("no comparison (want one of <=, <, >=, >, =), e.g. p99<=2ms")
	}
	name, value := text[:opAt], text[opAt+len(s.Op):]
	if s.Op == "=" && strings.HasPrefix(value, "=") {
		value = value[1:] // "==" reads as "="
	}
	var m *metric
	for i := range metrics {
		if metrics[i].name == name {
			m = &metrics[i]
		}
	}
	if m == nil {
		if name == "" {
			return bad("no metric before %q (want one of %s)", s.Op, metricNames())
		}
		return bad("unknown metric %q (want one of %s)", name, metricNames())
	}
	s.Metric = name
	if value == "" {
		return bad("no value after %q", s.Op)
	}
	for _, ref := range []string{RefBase, RefPeak} {
		f, ok := strings.CutSuffix(value, ref)
		if !ok {
			continue
		}
		s.Ref, s.Value = ref, 1
		if f != "" {
			if !strings.HasSuffix(f, "*") {
				return bad("%q: a multiple of %s is written factor*%s, e.g. 0.8*%s", value, ref, ref, ref)
			}
			v, err := strconv.ParseFloat(strings.TrimSuffix(f, "*"), 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return bad("%q: the factor of %s must be a non-negative number", value, ref)
			}
			s.Value = v
		}
		s.text = text
		if why := s.wrongWay(*m, value); why != "" {
			return bad("%s", why)
		}
		return s, nil
	}
	if m.latency {
		d, err := parseLatency(value)
		if err != nil {
			return bad("%v", err)
		}
		s.Value = float64(d)
	} else {
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return bad("%q is not a number", value)
		}
		if v < 0 {
			return bad("%s cannot be negative", name)
		}
		if m.integer && v != math.Trunc(v) {
			return bad("%s is a count: %q is not a whole number", name, value)
		}
		s.Value = v
	}
	s.text = text
	if why := s.wrongWay(*m, value); why != "" {
		return bad("%s", why)
	}
	return s, nil
}

// wrongWay says why s rewards failure (it would pass a point that did
// worse and fail one that did better) or can never hold, with the
// objective to write instead; "" when s bounds m the way a better
// server moves it. value is the bound as written.
func (s SLO) wrongWay(m metric, value string) string {
	good, side := "<=", "above"
	if !m.lower {
		good, side = ">=", "below"
	}
	fix := m.name + good + value
	switch {
	case s.Op == "=" && m.integer && s.Ref == "" && s.Value == 0:
		return "" // errors=0: the same as errors<=0
	case s.Op == "=":
		return fmt.Sprintf("holds only at exactly %s, failing a point that did better; bound %s from %s, e.g. %s", value, m.name, side, fix)
	case (s.Op == "<=" || s.Op == "<") != m.lower:
		return fmt.Sprintf("bounds %s from the wrong side: it passes a point that did worse and fails one that did better; bound it from %s, e.g. %s", m.name, side, fix)
	case s.Op == "<" && s.Value == 0:
		return fmt.Sprintf("can never hold: %s is never below 0; e.g. %s<=0", m.name, m.name)
	}
	return ""
}

// parseLatency reads a non-negative duration with a unit.
func parseLatency(v string) (time.Duration, error) {
	num, scale := "", time.Duration(0)
	for _, u := range []struct {
		suffix string
		scale  time.Duration
	}{{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"µs", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}} {
		if strings.HasSuffix(v, u.suffix) {
			num, scale = strings.TrimSuffix(v, u.suffix), u.scale
			break
		}
	}
	if scale == 0 {
		i := strings.LastIndexAny(v, "0123456789.")
		if i == len(v)-1 {
			return 0, fmt.Errorf("%q needs a unit (ns, us, ms or s)", v)
		}
		return 0, fmt.Errorf("%q: unknown unit %q (want ns, us, ms or s)", v, v[i+1:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, fmt.Errorf("%q is not a non-negative duration", v)
	}
	if f*float64(scale) > float64(math.MaxInt64) {
		return 0, fmt.Errorf("%q is too long", v)
	}
	return time.Duration(f * float64(scale)), nil
}

// Verdict is one objective checked against one point.
type Verdict struct {
	SLO    string  `json:"slo"`
	Passed bool    `json:"passed"`
	Got    float64 `json:"got"`   // the point's figure (ns for latencies)
	Bound  float64 `json:"bound"` // what it was compared with, base applied
	// Text says it in one line, e.g. "p99 2.41ms > 2ms".
	Text string `json:"text"`
}

// Check evaluates s on f; refs are the figures an objective written
// against base or peak is bounded by (one that is nil then fails, saying
// so).
func (s SLO) Check(f Figures, refs Refs) Verdict {
	var m metric
	for _, x := range metrics {
		if x.name == s.Metric {
			m = x
		}
	}
	v := Verdict{SLO: s.text}
	if m.get == nil {
		v.Text = fmt.Sprintf("%s: unknown metric", s.text)
		return v
	}
	v.Got, v.Bound = m.get(f), s.Value
	switch ref := map[string]*Figures{RefBase: refs.Base, RefPeak: refs.Peak}[s.Ref]; {
	case s.Ref == "":
	case ref == nil && s.Ref == RefBase:
		v.Text = fmt.Sprintf("%s: no base figure (the run has no smallest N with traffic)", s.text)
		return v
	case ref == nil:
		v.Text = fmt.Sprintf("%s: no peak figure (no count up to this one has traffic)", s.text)
		return v
	default:
		v.Bound = s.Value * m.get(*ref)
	}
	switch s.Op {
	case "<=":
		v.Passed = v.Got <= v.Bound
	case "<":
		v.Passed = v.Got < v.Bound
	case ">=":
		v.Passed = v.Got >= v.Bound
	case ">":
		v.Passed = v.Got > v.Bound
	case "=":
		v.Passed = v.Got == v.Bound
	}
	rel := s.Op
	if !v.Passed {
		rel = negate[s.Op]
	}
	bound := m.format(v.Bound)
	if s.Ref != "" {
		bound += fmt.Sprintf(" (%s×%s)", strconv.FormatFloat(s.Value, 'g', -1, 64), s.Ref)
	}
	v.Text = fmt.Sprintf("%s %s %s %s", s.Metric, m.format(v.Got), rel, bound)
	return v
}

var negate = map[string]string{"<=": ">", "<": ">=", ">=": "<", ">": "<=", "=": "≠"}

// format renders a figure of m for a verdict.
func (m metric) format(v float64) string {
	switch {
	case m.latency:
		return FormatLatency(time.Duration(v))
	case m.integer:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// FormatLatency prints d with 3 significant digits in the largest unit
// that keeps it at or above 1: 812ns, 9.46us, 2.41ms, 1.2s.
func FormatLatency(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond:
		return trim(float64(d)/1e3) + "us"
	case d < time.Second:
		return trim(float64(d)/1e6) + "ms"
	}
	return trim(float64(d)/1e9) + "s"
}

// trim prints f with 3 significant digits, without exponent or trailing
// zeros.
func trim(f float64) string {
	prec := 0
	switch {
	case f < 10:
		prec = 2
	case f < 100:
		prec = 1
	}
	s := strconv.FormatFloat(f, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// CheckAll evaluates every objective; passed is true when all hold (and
// when there are none).
func CheckAll(slos []SLO, f Figures, refs Refs) (verdicts []Verdict, passed bool) {
	passed = true
	for _, s := range slos {
		v := s.Check(f, refs)
		verdicts = append(verdicts, v)
		passed = passed && v.Passed
	}
	return verdicts, passed
}

// Median is each figure's median over fs (a count's trials): the lower
// middle of an even number, so that two trials do not invent a figure
// neither measured. The zero Figures when fs is empty.
func Median(fs []Figures) Figures {
	if len(fs) == 0 {
		return Figures{}
	}
	var out Figures
	for _, m := range metrics {
		xs := make([]float64, len(fs))
		for i, f := range fs {
			xs[i] = m.get(f)
		}
		slices.Sort(xs)
		m.set(&out, xs[(len(xs)-1)/2])
	}
	return out
}

// Best is each figure's best over fs (one a count, Median's): the lowest
// latency and errors, the highest rate. The zero Figures when fs is empty.
func Best(fs []Figures) Figures {
	if len(fs) == 0 {
		return Figures{}
	}
	out := fs[0]
	for _, f := range fs[1:] {
		for _, m := range metrics {
			if a, b := m.get(out), m.get(f); (m.lower && b < a) || (!m.lower && b > a) {
				m.set(&out, b)
			}
		}
	}
	return out
}
