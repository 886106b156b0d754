package mcpspans

import (
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// TestDriftGoesToItsAnswersSpan: the pins' drift of an answer goes to the span that
// answer ended, told before the span's end (block mode, the server's pump) or after
// it (warn mode, bookkeeping); a drift told of an answer that ended no span (here:
// before the answer read next) is not taken by the next span.
func TestDriftGoesToItsAnswersSpan(t *testing.T) {
	c, url := newSpanCollector(t)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: url + "/v1/traces", Protocol: telemetry.ProtoProtobuf},
		Version: "1", Server: "s", BatchDelay: time.Hour})
	h := New(Tracing{Exporter: x, Transport: "pipe", ToolDrift: true})
	list := func(id string, at time.Time) {
		h.Line(&intercept.Line{From: intercept.FromHost, At: at, Raw: []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)})
		h.Sent(at)
		h.Looked()
	}
	answer := func(id string, at time.Time) {
		h.Line(&intercept.Line{From: intercept.FromServer, At: at, Raw: []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[]}}`)})
	}
	t0 := time.Now()
	// A drift of an answer no span was made of (told before the next answer's read).
	h.ToolsListed("s", []Drift{{Tool: "stale", Status: "new"}})
	list("1", t0)
	// Block mode: told before the span's end, after the answer was read.
	at := time.Now()
	h.ToolsListed("s", []Drift{{Tool: "a", Status: "changed", Changed: []string{"description"}}})
	answer("1", at)
	h.Looked()
	// Warn mode: told after the span's end, before Looked.
	list("2", time.Now())
	answer("2", time.Now())
	h.ToolsListed("s", []Drift{{Tool: "b", Status: "renamed", From: "old"}})
	h.Looked()
	// No drift: no event.
	list("3", time.Now())
	answer("3", time.Now())
	h.ToolsListed("s", nil)
	h.Looked()
	closeExporter(x)
	c.mu.Lock()
	defer c.mu.Unlock()
	var got []string
	for _, sp := range c.spans {
		e := ""
		for _, ev := range sp.Events {
			a := attrs(ev.Attributes)
			e += ev.Name + ":" + a["gen_ai.tool.name"] + "/" + a["bir.tool.drift.status"] + "/" + a["bir.tool.drift.changed"] + "/" + a["bir.tool.drift.from"] + ";"
		}
		got = append(got, e)
	}
	want := []string{"bir.tool.drift:a/changed/description/;", "bir.tool.drift:b/renamed//old;", ""}
	if len(got) != len(want) {
		t.Fatalf("%d spans %q, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("span %d: events %q, want %q", i+1, got[i], want[i])
		}
	}
}
