package slo

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want []SLO
	}{
		{"", nil},
		{"p99<=2ms", []SLO{{Metric: "p99", Op: "<=", Value: 2e6}}},
		{" p99.9 < 500us , errors = 0 ", []SLO{{Metric: "p99.9", Op: "<", Value: 500e3}, {Metric: "errors", Op: "=", Value: 0}}},
		{"errors==0", []SLO{{Metric: "errors", Op: "=", Value: 0}}},
		{"rate>=0.8*base", []SLO{{Metric: "rate", Op: ">=", Value: 0.8, Ref: RefBase}}},
		{"rate>=0.9*peak", []SLO{{Metric: "rate", Op: ">=", Value: 0.9, Ref: RefPeak}}},
		{"p99<=peak", []SLO{{Metric: "p99", Op: "<=", Value: 1, Ref: RefPeak}}},
		{"p50<=base", []SLO{{Metric: "p50", Op: "<=", Value: 1, Ref: RefBase}}},
		{"max<1.5s", []SLO{{Metric: "max", Op: "<", Value: 1.5e9}}},
		{"mean<=10µs", []SLO{{Metric: "mean", Op: "<=", Value: 10e3}}},
		{"p90<100ns", []SLO{{Metric: "p90", Op: "<", Value: 100}}},
		{"errors<=3, errors<1", []SLO{{Metric: "errors", Op: "<=", Value: 3}, {Metric: "errors", Op: "<", Value: 1}}},
		{"rate>1000,client-rate>=0", []SLO{{Metric: "rate", Op: ">", Value: 1000}, {Metric: "client-rate", Op: ">=", Value: 0}}},
		{"client-rate>=100", []SLO{{Metric: "client-rate", Op: ">=", Value: 100}}},
		{"mbps>12.5", []SLO{{Metric: "mbps", Op: ">", Value: 12.5}}},
	}
	for _, tc := range tests {
		got, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if g.Metric != w.Metric || g.Op != w.Op || g.Value != w.Value || g.Ref != w.Ref {
				t.Errorf("Parse(%q)[%d] = %+v, want %+v", tc.in, i, g, w)
			}
			if strings.ContainsAny(g.String(), " ") || g.String() == "" {
				t.Errorf("Parse(%q)[%d].String() = %q", tc.in, i, g.String())
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"p99", `slo "p99": no comparison`},
		{"p98<=2ms", `unknown metric "p98" (want one of p50, p90, p99, p99.9, max, mean, errors, rate, client-rate, mbps)`},
		{"<=2ms", `no metric before "<="`},
		{"p99<=", `no value after "<="`},
		{"p99<=2", `"2" needs a unit`},
		{"p99<=2min", `unknown unit "min"`},
		{"p99<=-2ms", `not a non-negative duration`},
		{"p99<=1e30s", `too long`},
		{"errors=0.5", `errors is a count: "0.5" is not a whole number`},
		{"rate>=0.9peak", `a multiple of peak is written factor*peak`},
		{"rate<=0.9*peak", `bounds rate from the wrong side`},
		{"errors=-1", `errors cannot be negative`},
		{"rate>=fast", `"fast" is not a number`},
		{"rate>=0.8base", `written factor*base`},
		{"rate>=x*base", `factor of base must be a non-negative number`},
		{"p99<=2ms,,errors=0", `empty objective`},
		// Objectives that reward failure, or can never hold.
		{"errors>0", `slo "errors>0": bounds errors from the wrong side: it passes a point that did worse and fails one that did better; bound it from above, e.g. errors<=0`},
		{"errors>=1", `bound it from above, e.g. errors<=1`},
		{"errors=3", `slo "errors=3": holds only at exactly 3, failing a point that did better; bound errors from above, e.g. errors<=3`},
		{"errors<0", `slo "errors<0": can never hold: errors is never below 0; e.g. errors<=0`},
		{"p99>=2ms", `slo "p99>=2ms": bounds p99 from the wrong side`},
		{"max>1s", `bound it from above, e.g. max<=1s`},
		{"p50=90us", `holds only at exactly 90us`},
		{"p99<0ms", `can never hold`},
		{"p99>=2*base", `bound it from above, e.g. p99<=2*base`},
		{"rate<=1000", `slo "rate<=1000": bounds rate from the wrong side: it passes a point that did worse and fails one that did better; bound it from below, e.g. rate>=1000`},
		{"client-rate<7", `bound it from below, e.g. client-rate>=7`},
		{"mbps=12.5", `bound mbps from below, e.g. mbps>=12.5`},
		{"rate<=0.8*base", `bound it from below, e.g. rate>=0.8*base`},
		{"rate=base", `holds only at exactly base`},
		{"p99<=2ms,errors>0", `slo "errors>0"`},
		{"p99<=2ms,", `empty objective`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) accepted it", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): %q, want one line containing %q", tc.in, err, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	f := Figures{P50: 90 * time.Microsecond, P90: 400 * time.Microsecond, P99: 2410 * time.Microsecond,
		P999: 9 * time.Millisecond, Max: 1200 * time.Millisecond, Mean: 150 * time.Microsecond,
		Errors: 3, Rate: 8000, ClientRate: 7.5, MBps: 32.768}
	base := Figures{P99: 100 * time.Microsecond, Rate: 12000, ClientRate: 12000}
	tests := []struct {
		slo    string
		base   *Figures
		passed bool
		text   string
	}{
		{"p99<=2ms", nil, false, "p99 2.41ms > 2ms"},
		{"p99<=2.5ms", nil, true, "p99 2.41ms <= 2.5ms"},
		{"p50<100us", nil, true, "p50 90us < 100us"},
		{"p999<1s", nil, false, ""}, // not a metric: parse fails below
		{"p99.9<1s", nil, true, "p99.9 9ms < 1s"},
		{"max<=1s", nil, false, "max 1.2s > 1s"},
		{"errors=0", nil, false, "errors 3 ≠ 0"},
		{"errors<=3", nil, true, "errors 3 <= 3"},
		{"rate>=0.8*base", &base, false, "rate 8000 < 9600 (0.8×base)"},
		{"rate>=0.6*base", &base, true, "rate 8000 >= 7200 (0.6×base)"},
		{"rate>=0.6*base", nil, false, "no base figure"},
		{"p99<=30*base", &base, true, "p99 2.41ms <= 3ms (30×base)"},
		{"rate>=0.9*peak", &base, false, "rate 8000 < 10800 (0.9×peak)"},
		{"rate>=0.6*peak", &base, true, "rate 8000 >= 7200 (0.6×peak)"},
		{"rate>=0.6*peak", nil, false, "no peak figure"},
		{"client-rate>7", nil, true, "client-rate 7.5 > 7"},
		{"mbps>=32", nil, true, "mbps 32.768 >= 32"},
	}
	for _, tc := range tests {
		ss, err := Parse(tc.slo)
		if tc.text == "" {
			if err == nil {
				t.Errorf("Parse(%q) accepted it", tc.slo)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.slo, err)
		}
		refs := Refs{Base: tc.base}
		if ss[0].Ref == RefPeak {
			refs = Refs{Peak: tc.base}
		}
		v := ss[0].Check(f, refs)
		if v.Passed != tc.passed || !strings.Contains(v.Text, tc.text) {
			t.Errorf("%s: passed %v %q, want %v %q", tc.slo, v.Passed, v.Text, tc.passed, tc.text)
		}
	}
}

func TestCheckAll(t *testing.T) {
	ss, err := Parse("p99<=2ms,errors=0")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := CheckAll(ss, Figures{P99: time.Millisecond}, Refs{}); !ok {
		t.Error("a point within both objectives failed")
	}
	vs, ok := CheckAll(ss, Figures{P99: time.Millisecond, Errors: 1}, Refs{})
	if ok || len(vs) != 2 || !vs[0].Passed || vs[1].Passed {
		t.Errorf("one error: ok %v verdicts %+v", ok, vs)
	}
	if _, ok := CheckAll(nil, Figures{Errors: 5}, Refs{}); !ok {
		t.Error("no objectives must pass")
	}
}

func TestFormatLatency(t *testing.T) {
	for d, want := range map[time.Duration]string{
		812:                       "812ns",
		9460:                      "9.46us",
		999900:                    "1000us",
		2410 * time.Microsecond:   "2.41ms",
		20 * time.Millisecond:     "20ms",
		1200 * time.Millisecond:   "1.2s",
		125500 * time.Millisecond: "126s",
	} {
		if got := FormatLatency(d); got != want {
			t.Errorf("FormatLatency(%d) = %q, want %q", d, got, want)
		}
	}
}

// A reference takes each count's median over its trials and the best
// count's: the highest rate, the lowest latency.
func TestMedianBest(t *testing.T) {
	a := Figures{Rate: 100, P99: 3 * time.Millisecond}
	b := Figures{Rate: 300, P99: 1 * time.Millisecond}
	c := Figures{Rate: 200, P99: 2 * time.Millisecond}
	if m := Median([]Figures{a, b, c}); m.Rate != 200 || m.P99 != 2*time.Millisecond {
		t.Errorf("median of three %+v", m)
	}
	if m := Median([]Figures{b, a}); m.Rate != 100 || m.P99 != time.Millisecond {
		t.Errorf("median of two is the lower middle: %+v", m)
	}
	if m := Best([]Figures{a, c, b}); m.Rate != 300 || m.P99 != time.Millisecond {
		t.Errorf("best %+v", m)
	}
	if (Best(nil) != Figures{}) || (Median(nil) != Figures{}) {
		t.Error("no figures must give the zero Figures")
	}
}
