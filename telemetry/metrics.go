package telemetry

import (
	"strconv"
	"sync"
	"time"
)

// durationBounds are the buckets the conventions give mcp.client.operation.duration
// (and the session duration, which names none).
var durationBounds = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// sizeBounds are the buckets of the size histograms (bytes): a result of a few
// hundred bytes to the 16 MiB past which a proxy's answers are streamed whole.
var sizeBounds = []float64{256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}

// maxSeries caps the attribute sets one histogram keeps: past it, values go to one
// series marked otel.metric.overflow, as the SDK specification's cardinality limit says.
const maxSeries = 512

// metric is one histogram as exported.
type metric struct {
	name, description, unit string
	bounds                  []float64
	points                  []point
}

type point struct {
	attrs         []Attr
	start, time   time.Time
	count         uint64
	sum, min, max float64
	buckets       []uint64
}

// histogram is a cumulative explicit-bucket histogram by attribute set.
type histogram struct {
	name, description string
	unit              string
	bounds            []float64
	mu                sync.Mutex
	start             time.Time
	series            map[string]*point
	order             []string // first-seen order, for stable exports
	kbuf              []byte
}

func newHistogram(name, description, unit string, bounds []float64, start time.Time) *histogram {
	return &histogram{name: name, description: description, unit: unit, bounds: bounds, start: start, series: make(map[string]*point)}
}

func (h *histogram) record(attrs []Attr, v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seriesLocked(attrs).add(v, h.bounds)
}

// pointOf is the point of attrs, made when new (or the overflow point, past
// maxSeries).
func (h *histogram) pointOf(attrs []Attr) *point {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seriesLocked(attrs)
}

func (h *histogram) seriesLocked(attrs []Attr) *point {
	h.kbuf = h.kbuf[:0]
	for _, a := range attrs {
		h.kbuf = append(append(h.kbuf, a.Key...), 0)
		if a.IsInt {
			h.kbuf = strconv.AppendInt(append(h.kbuf, '#'), a.Int, 10)
		} else if a.IntText {
			h.kbuf = strconv.AppendInt(h.kbuf, a.Int, 10)
		} else {
			h.kbuf = append(h.kbuf, a.Str...)
		}
		h.kbuf = append(h.kbuf, 0)
	}
	p, ok := h.series[string(h.kbuf)]
	if !ok {
		k := string(h.kbuf)
		if len(h.series) >= maxSeries-1 {
			k = "\x00overflow"
			attrs = []Attr{{Key: "otel.metric.overflow", Str: "true"}}
			p, ok = h.series[k]
		}
		if !ok {
			p = &point{attrs: append([]Attr(nil), attrs...), start: h.start, buckets: make([]uint64, len(h.bounds)+1)}
			h.series[k] = p
			h.order = append(h.order, k)
		}
	}
	return p
}

// add counts one value of a histogram of bounds; the histogram's lock is held.
func (p *point) add(v float64, bounds []float64) {
	if p.count == 0 || v < p.min {
		p.min = v
	}
	if p.count == 0 || v > p.max {
		p.max = v
	}
	p.count++
	p.sum += v
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	p.buckets[i]++
}

// snapshot is the histogram as of now; nil when nothing was recorded.
func (h *histogram) snapshot(now time.Time) *metric {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.order) == 0 {
		return nil
	}
	m := &metric{name: h.name, description: h.description, unit: h.unit, bounds: h.bounds}
	for _, k := range h.order {
		p := *h.series[k]
		p.time = now
		p.buckets = append([]uint64(nil), p.buckets...)
		m.points = append(m.points, p)
	}
	return m
}
