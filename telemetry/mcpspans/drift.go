package mcpspans

import (
	"strings"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// A tool's drift from its pin (docs/pins.md) is an event on the span of the host's
// tools/list whose answer showed it: DriftEvent, one per tool not as pinned. The pins
// see each answer on the server's pump (block mode, --read-only) or in bookkeeping
// right after the span side (warn mode), so with Tracing.ToolDrift the span of a
// host's tools/list waits, ended, until bookkeeping has looked at its answer
// (Looked), and takes the drift told for it then.

// DriftEvent is the name of a tool drift's span event. It is in bir-proxy's namespace:
// the OpenTelemetry conventions reserve mcp.* (and gen_ai.*) for what they define,
// and define no drift; the tool is named by their gen_ai.tool.name.
const DriftEvent = "bir.tool.drift"

// Drift is one tool not as pinned, from pins.Watcher.Listed's statuses.
type Drift struct {
	Tool   string
	Status string // changed, new, renamed or removed
	// Changed are the top-level members that differ (changed); From is the pinned
	// name a renamed tool had.
	Changed []string
	From    string
}

// Caps on what the drift events take.
const (
	maxDriftEvents = 32 // events on one span; the rest are counted (DroppedEvents)
	maxListings    = 16 // answers' drifts told and not yet taken
	maxChanged     = 512
)

// listedDrift is what the pins told of one tools/list answer, at when they were told.
type listedDrift struct {
	at      time.Time
	events  []telemetry.Event
	dropped uint32
}

// driftQueue is the drifts told and not yet taken by a span, oldest first. It is told
// on the server's pump or bookkeeping's goroutine, and read on bookkeeping's.
type driftQueue struct {
	mu sync.Mutex
	q  []listedDrift
}

// ToolsListed tells the spans what the pins found of one answer to the host's
// tools/list (a page of it), in the order of the answers: each tool not as pinned
// (none: an answer with no drift, told all the same). server is the name the pins
// are kept under (`bir-proxy pins diff <server> <tool>`). Safe on any goroutine;
// it never waits but for a lock held for an append.
func (h *Spans) ToolsListed(server string, drifts []Drift) {
	ld := listedDrift{at: time.Now()}
	for i, d := range drifts {
		if i >= maxDriftEvents {
			ld.dropped = uint32(len(drifts) - maxDriftEvents)
			break
		}
		as := []telemetry.Attr{
			telemetry.String("gen_ai.tool.name", redact.Label(d.Tool, maxSpanText)),
			telemetry.String("bir.tool.drift.status", d.Status),
			telemetry.String("bir.pins.server", redact.Label(server, maxSpanText)),
		}
		if len(d.Changed) > 0 {
			as = append(as, telemetry.String("bir.tool.drift.changed", redact.Label(strings.Join(d.Changed, ","), maxChanged)))
		}
		if d.From != "" {
			as = append(as, telemetry.String("bir.tool.drift.from", redact.Label(d.From, maxSpanText)))
		}
		ld.events = append(ld.events, telemetry.Event{Name: DriftEvent, Attrs: as})
	}
	h.drifts.mu.Lock()
	defer h.drifts.mu.Unlock()
	if len(h.drifts.q) >= maxListings {
		h.drifts.q = h.drifts.q[1:] // never taken: a span that was not made
	}
	h.drifts.q = append(h.drifts.q, ld)
}

// take is the drift told for the answer read at at: the first told at or after it.
// What was told before it was of an answer that made no span, and goes.
func (d *driftQueue) take(at time.Time) (listedDrift, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.q) > 0 {
		ld := d.q[0]
		d.q = d.q[1:]
		if !ld.at.Before(at) {
			return ld, true
		}
	}
	d.q = nil
	return listedDrift{}, false
}

// heldList is a host's tools/list span ended at at, waiting for its drift.
type heldList struct {
	s  *openSpan
	at time.Time
}

// Looked sends the tools/list spans held for the drift of their answers, each with
// its events (intercept.Observer).
func (h *Spans) Looked() {
	if len(h.held) == 0 || h.off.Load() {
		return
	}
	for i, hl := range h.held {
		s := hl.s
		if ld, ok := h.drifts.take(hl.at); ok && len(ld.events) > 0 {
			for j := range ld.events {
				ld.events[j].Time = hl.at
			}
			s.sp.Events, s.sp.DroppedEvents = ld.events, ld.dropped
		}
		if s.sampled {
			h.x.Submit(s.sp)
		}
		h.release(s)
		h.held[i] = heldList{}
	}
	h.held = h.held[:0]
}
