package dashboard

import (
	"strconv"
	"time"
)

// barChart is an SVG bar chart drawn by the server (template "barchart" in partials.html):
// one bar per time bucket, a y axis with three ticks, time labels under the first, middle and
// last bar, and a tooltip (<title>) per bar.
type barChart struct {
	Title  string
	Class  string // colours the bars (css)
	Width  int
	Height int
	Bars   []chartBar
	YTicks []chartTick
	XTicks []chartTick
	Total  int64
	Max    int64
	Plot   chartRect // the plotting area
}

type chartBar struct {
	X, Y, W, H float64
	Label      string
}

type chartTick struct {
	X, Y   float64 // where the label is
	LineY  float64 // where the grid line is (y ticks)
	Label  string
	Anchor string // text-anchor: start, middle or end
}

type chartRect struct{ X, Y, W, H, Right, Bottom float64 }

const (
	chartWidth  = 640
	chartHeight = 170
	chartLeft   = 44
	chartRight  = 8
	chartTop    = 10
	chartBottom = 24
)

// newBarChart draws values (one per bucket starting at start, each step long).
func newBarChart(title, class string, start time.Time, step time.Duration, values []int64) barChart {
	c := barChart{Title: title, Class: class, Width: chartWidth, Height: chartHeight}
	c.Plot = chartRect{X: chartLeft, Y: chartTop, W: chartWidth - chartLeft - chartRight, H: chartHeight - chartTop - chartBottom}
	c.Plot.Right, c.Plot.Bottom = c.Plot.X+c.Plot.W, c.Plot.Y+c.Plot.H
	for _, v := range values {
		c.Total += v
		if v > c.Max {
			c.Max = v
		}
	}
	top := niceCeil(c.Max)
	n := len(values)
	if n == 0 {
		return c
	}
	slot := c.Plot.W / float64(n)
	gap := slot * 0.15
	for i, v := range values {
		h := c.Plot.H * float64(v) / float64(top)
		from := start.Add(time.Duration(i) * step)
		c.Bars = append(c.Bars, chartBar{
			X: c.Plot.X + float64(i)*slot + gap/2, Y: c.Plot.Y + c.Plot.H - h, W: slot - gap, H: h,
			Label: from.UTC().Format("15:04") + "–" + from.Add(step).UTC().Format("15:04") + " UTC: " + formatInt(v),
		})
	}
	for _, f := range []float64{0, 0.5, 1} {
		y := c.Plot.Y + c.Plot.H - c.Plot.H*f
		c.YTicks = append(c.YTicks, chartTick{X: c.Plot.X - 6, Y: y + 4, LineY: y, Label: compactFloat(f * float64(top)), Anchor: "end"})
	}
	for _, i := range []int{0, n / 2, n - 1} {
		t := start.Add(time.Duration(i) * step)
		c.XTicks = append(c.XTicks, chartTick{X: c.Plot.X + (float64(i)+0.5)*slot, Y: float64(chartHeight - 6),
			Label: t.UTC().Format("15:04"), Anchor: "middle"})
	}
	return c
}

// niceCeil rounds a chart's maximum up to 1, 2 or 5 times a power of ten (at least 2, so the
// middle tick is a whole number).
func niceCeil(v int64) int64 {
	if v <= 2 {
		return 2
	}
	p := int64(1)
	for p*10 <= v {
		p *= 10
	}
	for _, m := range []int64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// compactFloat is compactInt for a tick that may be a half (2.5).
func compactFloat(v float64) string {
	if v == float64(int64(v)) {
		return compactInt(int64(v))
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// compactInt writes 1200 as 1.2k and 3400000 as 3.4M.
func compactInt(v int64) string {
	switch {
	case v >= 1_000_000:
		return strconv.FormatFloat(float64(v)/1e6, 'f', -1, 64) + "M"
	case v >= 10_000:
		return strconv.FormatFloat(float64(v)/1e3, 'f', 0, 64) + "k"
	case v >= 1000:
		return strconv.FormatFloat(float64(v)/1e3, 'f', 1, 64) + "k"
	default:
		return strconv.FormatInt(v, 10)
	}
}
