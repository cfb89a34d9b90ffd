package report

import (
	"bytes"
	"image/color"
	"image/png"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/image/font/sfnt"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot is one rendered figure: SVG for the HTML, PNG beside the Markdown.
type Plot struct {
	Name  string // file stem, e.g. "success"
	Title string
	SVG   []byte // without the XML prolog, ready to inline
	PNG   []byte
	// Empty says why there is no figure ("no samples"); SVG/PNG are nil.
	Empty string
}

// Series is one line of a figure.
type Series struct {
	Label string
	X, Y  []float64
	// Low/High are the error bar ends (absolute y values), if any.
	Low, High []float64
}

const plotW, plotH = 16 * vg.Centimeter, 9 * vg.Centimeter

// A browser shows the SVG's texts in its own font when gonum's Liberation
// Serif is not installed (DejaVu Serif on Debian, about a quarter wider),
// so gonum's own fit of a tick label at the canvas edge is not enough:
// textMargin keeps that much free on every side, and the legend gets
// legendSlack times the width gonum measures.
const (
	textMargin  = vg.Length(10)
	legendSlack = 1.35
	legendGap   = vg.Length(8)
)

// Series that lie on one another stay distinguishable by their dashes and
// markers (resources in per-client mode: a CQ and an MR per client).
var (
	seriesDashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)},
		{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}
	seriesGlyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{}}
)

// linePlot renders series against a shared x axis.
func linePlot(name, title, xlabel, ylabel string, series []Series) Plot {
	return drawLines(name, title, xlabel, ylabel, series, linearY)
}

// logLinePlot is linePlot on a logarithmic y axis, for figures that span
// decades (latencies from microseconds to seconds); values must be > 0.
func logLinePlot(name, title, xlabel, ylabel string, series []Series) Plot {
	return drawLines(name, title, xlabel, ylabel, series, logY)
}

// percentLinePlot is linePlot for percentages: the axis reaches 100 and
// has a tick there, the value a reader looks for.
func percentLinePlot(name, title, xlabel, ylabel string, series []Series) Plot {
	return drawLines(name, title, xlabel, ylabel, series, percentY)
}

type yAxis int

const (
	linearY yAxis = iota
	logY
	percentY
)

// tickAt adds a labelled tick at a value its ticker left out.
type tickAt struct {
	plot.Ticker
	at float64
}

func (t tickAt) Ticks(lo, hi float64) []plot.Tick {
	ticks := t.Ticker.Ticks(lo, hi)
	for i, k := range ticks {
		if k.Value == t.at {
			ticks[i].Label = strconv.FormatFloat(t.at, 'f', -1, 64)
			return ticks
		}
	}
	if t.at < lo || t.at > hi {
		return ticks
	}
	return append(ticks, plot.Tick{Value: t.at, Label: strconv.FormatFloat(t.at, 'f', -1, 64)})
}

func drawLines(name, title, xlabel, ylabel string, series []Series, axis yAxis) Plot {
	out := Plot{Name: name, Title: title}
	logY := axis == logY
	if logY {
		series = positive(series)
	}
	n := 0
	for _, s := range series {
		n += len(s.X)
	}
	if n == 0 {
		out.Empty = "no data"
		if logY {
			out.Empty = "no value above 0 to draw on a log scale"
		}
		return out
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if axis == percentY {
		p.Y.Tick.Marker = tickAt{plot.DefaultTicks{}, 100}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, s := range series {
		if len(s.X) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(s.X))
		for j := range s.X {
			xys[j].X, xys[j].Y = s.X[j], s.Y[j]
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			out.Empty = err.Error()
			return out
		}
		c := plotutil.Color(i)
		l.Color, pts.Color = c, c
		l.Dashes = seriesDashes[i%len(seriesDashes)]
		pts.Shape = seriesGlyphs[i%len(seriesGlyphs)]
		p.Add(l, pts)
		if s.Low != nil {
			eb := errBars{XYs: xys}
			for j := range s.X {
				eb.errs = append(eb.errs, struct{ Low, High float64 }{s.Y[j] - s.Low[j], s.High[j] - s.Y[j]})
			}
			bars, err := plotter.NewYErrorBars(eb)
			if err == nil {
				bars.Color = c
				p.Add(bars)
			}
		}
		if len(series) > 1 {
			p.Legend.Add(legendLabel(series, i), spaced{l}, spaced{pts})
		}
	}
	if axis == percentY {
		p.Y.Max = max(p.Y.Max, 100)
	}
	return render(p, out)
}

// positive is series without the points a log axis cannot draw (a
// value, or its error bar's low end, at or below 0), which would stop
// the whole plot.
func positive(series []Series) []Series {
	out := make([]Series, len(series))
	for i, s := range series {
		o := Series{Label: s.Label}
		for j := range s.X {
			if s.Y[j] <= 0 || (s.Low != nil && s.Low[j] <= 0) {
				continue
			}
			o.X, o.Y = append(o.X, s.X[j]), append(o.Y, s.Y[j])
			if s.Low != nil {
				o.Low, o.High = append(o.Low, s.Low[j]), append(o.High, s.High[j])
			}
		}
		out[i] = o
	}
	return out
}

// legendLabel names series[i], saying which earlier series it lies on
// exactly ("MRs (= CQs)"): one line would otherwise hide the other.
func legendLabel(series []Series, i int) string {
	l := safeLabel(series[i].Label)
	for _, e := range series[:i] {
		if len(e.X) > 0 && slices.Equal(e.X, series[i].X) && slices.Equal(e.Y, series[i].Y) {
			return l + " (= " + safeLabel(e.Label) + ")"
		}
	}
	return l
}

// Bars is one series of a grouped bar chart: one value per group.
type Bars struct {
	Label string
	Y     []float64
}

// barPlot renders series side by side within each named group; ref > 0
// draws a dashed horizontal line at that value, labelled refLabel.
func barPlot(name, title, ylabel string, groups []string, series []Bars, ref float64, refLabel string) Plot {
	out := Plot{Name: name, Title: title}
	if len(groups) == 0 || len(series) == 0 {
		out.Empty = "no data"
		return out
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	names := make([]string, len(groups))
	for i, g := range groups {
		names[i] = safeLabel(g)
	}
	p.NominalX(names...)
	// Each group gets 80% of its share of the width, split among the bars.
	w := vg.Length(float64(plotW-2*vg.Centimeter) / float64(len(groups)) * 0.8 / float64(len(series)))
	w = min(w, 1.5*vg.Centimeter)
	for i, s := range series {
		vals := make(plotter.Values, len(groups))
		copy(vals, s.Y)
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			out.Empty = err.Error()
			return out
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(i)-float64(len(series)-1)/2) * w
		p.Add(b)
		p.Legend.Add(safeLabel(s.Label), spaced{b})
	}
	if ref > 0 {
		l := plotter.NewFunction(func(float64) float64 { return ref })
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(safeLabel(refLabel), spaced{l})
		p.Y.Max = max(p.Y.Max, ref)
	}
	// Half a group of margin on each side, a little above the tallest bar;
	// the legend is beside the bars (render).
	p.X.Min, p.X.Max = -0.6, float64(len(groups))-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.05
	return render(p, out)
}

// spaced draws a legend thumbnail a little narrower than its slot, so
// the entry's text does not touch it (gonum leaves only a space's width).
type spaced struct{ plot.Thumbnailer }

func (s spaced) Thumbnail(c *draw.Canvas) {
	n := *c
	n.Max.X -= 4
	s.Thumbnailer.Thumbnail(&n)
}

type errBars struct {
	plotter.XYs
	errs plotter.YErrors
}

func (e errBars) YError(i int) (float64, float64) { return e.errs.YError(i) }

// render draws p as SVG and PNG: the axes inside textMargin, and the
// legend, if any, to the right of the axes, below the title, where it
// covers no data.
func render(p *plot.Plot, out Plot) Plot {
	legend := p.Legend
	p.Legend = plot.NewLegend()
	p.BackgroundColor = nil // the whole canvas is filled below
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(10)
	var svg, pngBuf bytes.Buffer
	for _, f := range []struct {
		format string
		buf    *bytes.Buffer
	}{{"svg", &svg}, {"png", &pngBuf}} {
		c, err := draw.NewFormattedCanvas(plotW, plotH, f.format)
		if err != nil {
			out.Empty = err.Error()
			return out
		}
		dc := draw.New(c)
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
		var legendW vg.Length
		if w := legend.Rectangle(dc).Size().X; w > 0 {
			legendW = w*legendSlack + legendGap
		}
		p.Draw(draw.Crop(dc, textMargin, -textMargin-legendW, textMargin, -textMargin))
		if legendW > 0 {
			title := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
			legend.Draw(draw.Crop(dc, plotW-textMargin-legendW+legendGap, -textMargin, textMargin, -textMargin-title))
		}
		if err := writeCanvas(c, f.buf); err != nil {
			out.Empty = err.Error()
			return out
		}
	}
	s := svg.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	// Scale with the page: drop the fixed size, keep the viewBox.
	s = strings.Replace(s, "<svg ", `<svg role="img" class="plot" `, 1)
	// Where Liberation Serif is missing, its metric twin Times New Roman
	// (Windows, macOS) keeps gonum's layout; any serif comes last.
	s = strings.ReplaceAll(s, "font-family:Liberation Serif;", "font-family:'Liberation Serif','Times New Roman',Times,serif;")
	out.SVG, out.PNG = []byte(s), pngBuf.Bytes()
	return out
}

// writeCanvas writes c in its format. A PNG is deflated at the fastest
// level: its encoding took half of a report's time at the default level,
// and a figure's file is 4% larger.
func writeCanvas(c vg.CanvasWriterTo, w *bytes.Buffer) error {
	if p, ok := c.(vgimg.PngCanvas); ok {
		return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, p.Image())
	}
	_, err := c.WriteTo(w)
	return err
}

// safeLabel keeps every printable character the plots' font has a glyph
// for ("×", "#", "≥" all draw) and puts "?" for the rest, which would
// draw as an empty box; a label is cut at 60 characters.
func safeLabel(s string) string {
	face := font.DefaultCache.Lookup(plot.DefaultFont, 12)
	var buf sfnt.Buffer
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == 60 {
			break
		}
		n++
		if i, err := face.Face.GlyphIndex(&buf, r); unicode.IsPrint(r) && (r == ' ' || err == nil && i != 0) {
			b.WriteRune(r)
		} else {
			b.WriteRune('?')
		}
	}
	return b.String()
}

func pctAxis(x float64) float64 { return x * 100 }
