package mcpspans

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/intercept"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// A host's ids are any JSON value, of any length: the open spans of requests the
// server leaves unanswered (up to maxOpenSpans) must not each keep a copy of an id of
// a quarter megabyte. A long id's span is still found by its answer, and told from
// another long id that differs only at its end.
func TestLongIDsAreNotKeptWhole(t *testing.T) {
	_, url := newSpanCollector(t)
	x := telemetry.New(telemetry.Options{Config: telemetry.Config{TracesURL: url + "/v1/traces", Protocol: telemetry.ProtoProtobuf}, BatchDelay: time.Hour})
	t.Cleanup(func() { closeExporter(x) })
	h := New(Tracing{Exporter: x})
	now := time.Now()
	long := strings.Repeat("i", 256<<10)
	num := strings.Repeat("7", 70000)
	ids := []string{`"` + long + `a"`, `"` + long + `b"`, `"` + long + `\u0063"`, num + "1", num + "2"}
	for i, id := range ids {
		ev := intercept.Line{From: intercept.FromHost, At: now, Raw: []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"t` + string(rune('a'+i)) + `"}}`)}
		h.Line(&ev)
		h.Sent(now)
	}
	for _, id := range []string{ids[1], ids[4]} { // the second's answer, and the fifth's
		ev := intercept.Line{From: intercept.FromServer, At: now, Raw: []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)}
		h.Line(&ev)
	}
	kept := 0
	var open []string
	for s := range h.open.all() {
		kept += len(s.key)
		open = append(open, s.target)
	}
	slices.Sort(open)
	if !slices.Equal(open, []string{"ta", "tc", "td"}) {
		t.Errorf("open spans %v, want ta, tc, td", open)
	}
	if kept > 4<<10 {
		t.Errorf("the open spans keep %d bytes of their ids", kept)
	}
}

func closeExporter(x *telemetry.Exporter) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	x.Close(ctx)
}
