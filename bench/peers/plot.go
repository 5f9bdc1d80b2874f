package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// chart is a line chart written as hand-made SVG: axes with ticks and
// labels, one polyline with markers per series, and a legend. Either axis
// may be logarithmic (base 10), which the peer figures need: throughputs
// and latencies of the stores differ by orders of magnitude.
type chart struct {
	Title, XLabel, YLabel string
	XLog, YLog            bool
	// XTicks, if set, are the x values to tick and label (e.g. the Rs
	// measured); otherwise ticks are chosen from the data range.
	XTicks []float64
	Series []series
}

type series struct {
	Name   string
	Points []point
}

type point struct{ X, Y float64 }

// palette is a colour-blind-safe set (Okabe-Ito), one per series.
// Okabe-Ito's yellow is left out: it is unreadable as a thin line on white.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999"}

// Plot geometry, in SVG user units.
const (
	plotW, plotH             = 760, 440
	marginL, marginR         = 80, 190
	marginT, marginB         = 40, 60
	innerW                   = plotW - marginL - marginR
	innerH                   = plotH - marginT - marginB
	maxTicks                 = 8
	fontFamily               = "Helvetica, Arial, sans-serif"
	minLogValue      float64 = 1e-300
)

// axis maps data values to pixels along one dimension.
type axis struct {
	log      bool
	lo, hi   float64 // data range (log10 of it if log)
	from, to float64 // pixel range
}

func (a axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	if a.hi == a.lo {
		return (a.from + a.to) / 2
	}
	return a.from + (v-a.lo)/(a.hi-a.lo)*(a.to-a.from)
}

// usable reports whether v can be drawn on an axis (positive for log).
func usable(v float64, log bool) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > minLogValue)
}

// bounds returns the range of the drawable values, padded for a linear
// axis to start at zero when all data are positive.
func bounds(vals []float64, log bool) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if !usable(v, log) {
			continue
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if math.IsInf(lo, 1) {
		if log {
			return 1, 10, false
		}
		return 0, 1, false
	}
	if log {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if lo == hi {
			hi = lo * 10
		}
		return lo, hi, true
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	return math.Floor(lo/step) * step, math.Ceil(hi/step) * step, true
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// ticks returns the tick values of [lo, hi].
func ticks(lo, hi float64, log bool) []float64 {
	var out []float64
	if !(hi >= lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	if log {
		if !(lo > 0) {
			return nil
		}
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			out = append(out, math.Pow(10, e))
		}
		if len(out) <= 3 { // a short range: add 2x and 5x ticks
			var more []float64
			for _, t := range out {
				for _, m := range []float64{1, 2, 5} {
					if v := t * m; v >= lo && v <= hi {
						more = append(more, v)
					}
				}
			}
			out = more
		}
		return out
	}
	step := niceStep((hi - lo) / 5)
	for v := lo; v <= hi+step/1e6 && len(out) < 4*maxTicks; v += step {
		out = append(out, v)
	}
	return out
}

// label formats a tick value compactly: 1, 2.5, 10k, 1.2M, 0.01.
func label(v float64) string {
	av := math.Abs(v)
	switch {
	case av >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case av >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// esc returns s escaped for SVG text and attributes.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// Write writes the chart as a standalone SVG document. Points that cannot
// be drawn (NaN, infinite, or not positive on a log axis) are left out; a
// chart with nothing to draw still has its axes and says "no data".
func (c chart) Write(w io.Writer) error {
	var xs, ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			if usable(p.X, c.XLog) && usable(p.Y, c.YLog) {
				xs = append(xs, p.X)
				ys = append(ys, p.Y)
			}
		}
	}
	for _, t := range c.XTicks {
		if usable(t, c.XLog) {
			xs = append(xs, t)
		}
	}
	xlo, xhi, _ := bounds(xs, c.XLog)
	ylo, yhi, haveData := bounds(ys, c.YLog)
	if len(c.XTicks) > 0 && haveData && c.XLog {
		// Fit the x axis to the ticks, not to whole decades.
		xlo, xhi = math.Inf(1), math.Inf(-1)
		for _, x := range xs {
			xlo, xhi = math.Min(xlo, x), math.Max(xhi, x)
		}
		xlo, xhi = xlo/1.4, xhi*1.4
	}
	ax := axis{log: c.XLog, from: marginL, to: marginL + innerW}
	ay := axis{log: c.YLog, from: marginT + innerH, to: marginT}
	ax.lo, ax.hi, ay.lo, ay.hi = xlo, xhi, ylo, yhi
	if c.XLog {
		ax.lo, ax.hi = math.Log10(xlo), math.Log10(xhi)
	}
	if c.YLog {
		ay.lo, ay.hi = math.Log10(ylo), math.Log10(yhi)
	}

	bw := bufio.NewWriter(w)
	pf := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	pf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n", plotW, plotH, plotW, plotH, fontFamily)
	pf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	pf(`<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", marginL, esc(c.Title))

	// Grid and ticks.
	xt := c.XTicks
	if len(xt) == 0 {
		xt = ticks(xlo, xhi, c.XLog)
	}
	for _, t := range xt {
		if !usable(t, c.XLog) {
			continue
		}
		x := ax.pos(t)
		pf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", x, marginT, x, marginT+innerH)
		pf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>`+"\n", x, marginT+innerH, x, marginT+innerH+5)
		pf(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, marginT+innerH+19, esc(label(t)))
	}
	for _, t := range ticks(ylo, yhi, c.YLog) {
		y := ay.pos(t)
		pf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", marginL, y, marginL+innerW, y)
		pf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>`+"\n", marginL-5, y, marginL, y)
		pf(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-8, y, esc(label(t)))
	}
	// Axes and their labels.
	pf(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", marginL, marginT, innerW, innerH)
	pf(`<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", marginL+innerW/2, plotH-16, esc(c.XLabel))
	pf(`<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>`+"\n", marginT+innerH/2, marginT+innerH/2, esc(c.YLabel))
	if !haveData {
		pf(`<text x="%d" y="%d" text-anchor="middle" fill="#888">no data</text>`+"\n", marginL+innerW/2, marginT+innerH/2)
	}

	// Series and legend.
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		var pts []string
		for _, p := range s.Points {
			if usable(p.X, c.XLog) && usable(p.Y, c.YLog) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", ax.pos(p.X), ay.pos(p.Y)))
			}
		}
		pf(`<g class="series" data-name="%s">`+"\n", esc(s.Name))
		if len(pts) > 1 {
			pf(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		}
		for _, p := range pts {
			xy := strings.SplitN(p, ",", 2)
			pf(`<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n", xy[0], xy[1], color)
		}
		pf("</g>\n")
		ly := marginT + 10 + i*20
		lx := marginL + innerW + 16
		pf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", lx, ly, lx+22, ly, color)
		pf(`<circle cx="%d" cy="%d" r="3.5" fill="%s"/>`+"\n", lx+11, ly, color)
		pf(`<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, ly, esc(s.Name))
	}
	pf("</svg>\n")
	return bw.Flush()
}
