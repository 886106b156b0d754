package intercept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// streamStrip runs jsonlex.ArgStrip over msg cut at the given points, as the relay
// does for a host line it streams: what it emitted, and whether it wanted the line
// whole instead.
func streamStrip(msg []byte, key string, cuts []int) (out []byte, whole, inexact bool) {
	out, whole, inexact, _ = streamStripCapture(msg, key, cuts)
	return out, whole, inexact
}

// captured is what ArgStrip.Capture kept of a call.
type captured struct {
	args               []byte
	name, meta, callID []byte
}

func streamStripCapture(msg []byte, key string, cuts []int) (out []byte, whole, inexact bool, c captured) {
	a := jsonlex.NewArgStrip(key)
	a.Capture(func(p []byte, begin bool) {
		if begin {
			c.args = c.args[:0]
		}
		c.args = append(c.args, p...)
	})
	defer func() { c.name, c.meta, c.callID = a.Name(), a.Meta(), a.CallID() }()
	emit := func(b []byte) { out = append(out, b...) }
	prev := 0
	for _, c := range cuts {
		if c < prev || c > len(msg) {
			continue
		}
		a.Write(msg[prev:c], emit)
		prev = c
	}
	a.Write(msg[prev:], emit)
	if a.Whole() {
		if out != nil {
			panic("ArgStrip wanted the line whole after emitting some of it")
		}
		return a.Held(), true, a.Inexact, c
	}
	a.End(emit)
	return out, false, a.Inexact, c
}

// checkStreamStrip is the differential: for a valid message, the streamed edit is the
// whole-line edit, byte for byte, whatever the pieces; one it wants whole it holds
// unchanged.
func checkStreamStrip(t *testing.T, msg []byte, key string, cuts []int) {
	t.Helper()
	if !jsonlex.Valid(msg) {
		// Still: no panic, and nothing grows past the line.
		out, _, _ := streamStrip(msg, key, cuts)
		if len(out) > len(msg) {
			t.Fatalf("streamed edit of invalid input grew it: %d > %d bytes", len(out), len(msg))
		}
		return
	}
	want, sc := strip(bytes.Clone(msg), key)
	got, whole, inexact, c := streamStripCapture(msg, key, cuts)
	if whole {
		if !bytes.Equal(got, msg) {
			t.Fatalf("held line differs from the line:\n got %q\nwant %q", got, msg)
		}
		return
	}
	if inexact {
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("streamed edit differs from the whole line's (cuts %v):\n msg %q\n got %q\nwant %q", cuts, msg, got, want)
	}
	// What the capture kept is what interception reads of the whole line.
	f, ok := jsonlex.TopFields(want)
	if !ok || f.Params == nil || f.Params[0] != '{' || bytes.Count(want, []byte("{")) == 0 || !singleValue(want) {
		return
	}
	if w := jsonlex.Get(f.Params, "arguments"); !bytes.Equal(c.args, w) {
		t.Fatalf("captured arguments %q, the whole line's %q (msg %q, cuts %v)", c.args, w, msg, cuts)
	}
	if w := jsonlex.Get(f.Params, "name"); !bytes.Equal(c.name, w) && len(w) <= 16<<10 { // a longer one is kept cut (TestCaptureKeepsTheFirstPartOfALongName)
		t.Fatalf("captured name %q, the whole line's %q (msg %q)", c.name, w, msg)
	}
	if w := jsonlex.Get(f.Params, "_meta"); !bytes.Equal(c.meta, w) && len(w) <= 16<<10 {
		t.Fatalf("captured _meta %q, the whole line's %q (msg %q)", c.meta, w, msg)
	}
	if w := jsonlex.Get(f.Params, "_meta"); len(w) > 16<<10 && w[0] == '{' {
		// Too long to keep: its trace members are (TestStreamedCallKeepsItsTraceParent).
		for _, k := range []string{"traceparent", "tracestate"} {
			wv := jsonlex.Get(w, k)
			if len(wv) == 0 || wv[0] != '"' || len(wv) > 1024 {
				wv = nil // what a span ignores is not kept
			}
			if gv := jsonlex.Get(c.meta, k); !bytes.Equal(gv, wv) {
				t.Fatalf("captured _meta's %s %q, the whole line's %q (kept %.300q)", k, gv, wv, c.meta)
			}
		}
	}
	if len(sc.callIDs) == 1 {
		var w string
		if sc.callIDs[0] != nil {
			w = *sc.callIDs[0]
		}
		g := string(c.callID)
		if s, ok := jsonlex.DecodeString(c.callID); ok && len(c.callID) > 0 && c.callID[0] == '"' {
			g = s
		}
		if (sc.callIDs[0] == nil) != (c.callID == nil) || g != w {
			t.Fatalf("captured correlation value %q, the whole line's %q (msg %q)", c.callID, w, msg)
		}
	}
}

func TestArgStripCases(t *testing.T) {
	k := DefaultCorrelationKey
	cases := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"_bir_call_id":"c1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"_bir_call_id":"c1","a":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{ "_bir_call_id" : "c1" }}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":1 , "_bir_call_id":"c1" , "_bir_call_id":{"x":[1,2]} },"name":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"a":1,"_bir_call_id":"c1","_bir_call_id":2,"b":"q"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"\u005fbir_call_id":"c1","b":"q\"\\"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"b":{"_bir_call_id":1},"_bir_call_idx":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":1},"arguments":{"_bir_call_id":2,"z":0}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":[{"_bir_call_id":1}]}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":true,"n":-1.5e3,"t":null}}}`,
		`{"params":{"arguments":{"_bir_call_id":1}},"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"arguments":{"_bir_call_id":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{},"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":1}},"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/c\u0061ll","params":{"arguments":{"_bir_call_id":1,"p":"` + strings.Repeat("ab\\n", 300) + `"}}}`,
		` {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":"c"}}} `,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"` + strings.Repeat("k", 200) + `":1,"_bir_call_id":"c"}}}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		msg := []byte(c)
		checkStreamStrip(t, msg, k, nil)
		for range 200 {
			checkStreamStrip(t, msg, k, randomCuts(rng, len(msg)))
		}
		for i := range len(msg) {
			checkStreamStrip(t, msg, k, []int{i})
		}
	}
	// The method after the params: the line is read whole.
	if _, whole, _ := streamStrip([]byte(cases[11]), k, nil); !whole {
		t.Fatal("a line whose params come before its method was not held whole")
	}
	// Something is edited at all (the checker can fail).
	if out, _, _ := streamStrip([]byte(cases[0]), k, []int{40}); bytes.Contains(out, []byte("_bir_call_id")) {
		t.Fatalf("the key passed: %q", out)
	}
}

// singleValue says msg is one JSON value (with spacing): the capture is of the first.
func singleValue(msg []byte) bool {
	d := json.NewDecoder(bytes.NewReader(msg))
	var v json.RawMessage
	if d.Decode(&v) != nil {
		return false
	}
	_, err := d.Token()
	return err == io.EOF
}

func randomCuts(rng *rand.Rand, n int) []int {
	var cuts []int
	for p := 0; p < n; {
		p += 1 + rng.IntN(max(n/4, 2))
		cuts = append(cuts, min(p, n))
	}
	return cuts
}

// TestArgStripRandom: generated calls, the key anywhere, any split.
func TestArgStripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		msg := genCall(rng)
		checkStreamStrip(t, msg, DefaultCorrelationKey, randomCuts(rng, len(msg)))
		line, _ := randomCall(rng) // strip's own generator
		checkStreamStrip(t, []byte(line), DefaultCorrelationKey, randomCuts(rng, len(line)))
	}
}

func genCall(rng *rand.Rand) []byte {
	ws := func() string { return []string{"", "", " ", "\n\t ", "  "}[rng.IntN(5)] }
	var args []string
	for range rng.IntN(6) {
		key := []string{`"_bir_call_id"`, `"a"`, `"\u005fbir_call_id"`, `"b"`, `"_bir_call_id2"`}[rng.IntN(5)]
		val := []string{`1`, `"s"`, `{"_bir_call_id":1}`, `[1,{"x":"y"}]`, `null`, `"` + strings.Repeat("x\\\"", rng.IntN(40)) + `"`}[rng.IntN(6)]
		args = append(args, ws()+key+ws()+":"+ws()+val+ws())
	}
	a := "{" + ws() + strings.Join(args, ",") + ws() + "}"
	if len(args) == 0 {
		a = "{" + ws() + "}"
	}
	members := []string{`"jsonrpc":"2.0"`, `"id":` + fmt.Sprint(rng.IntN(100)), `"method":"tools/call"`, `"params":{"name":"t",` + ws() + `"arguments":` + a + `}`}
	if rng.IntN(8) == 0 {
		members[2], members[3] = members[3], members[2]
	}
	return []byte("{" + strings.Join(members, ","+ws()) + "}")
}

func FuzzArgStrip(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"_bir_call_id":"c1"}}}`), uint16(17), uint16(3))
	f.Add([]byte(`{"id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":"c1" , "a":[1,2]}}}`), uint16(40), uint16(1))
	f.Add([]byte(`[{"id":1,"method":"tools/call","params":{"arguments":{"_bir_call_id":"c1"}}}]`), uint16(5), uint16(9))
	// Review seeds: escaped and duplicate keys, a run of removed members, whitespace
	// around them, a method after the params, a later object of a batch.
	f.Add([]byte(`{"id":1,"method":"tools/call","params":{"arguments":{"a":1 ,"_bir_call_id":1 , "b":3,"\u005fbir_call_id":2 , "c":4 }}}`), uint16(3), uint16(2))
	f.Add([]byte(`{"id":1,"method":"tools\/call","method":"x","params":{"arguments":{"_bir_call_id":[],"_bir_call_id":{}},"arguments":{"_bir_call_id":1}}}`), uint16(1), uint16(1))
	f.Add([]byte(`[{"id":1,"method":"tools/call","params":{}},{"params":{"arguments":{"_bir_call_id":1}},"method":"x"}]`), uint16(7), uint16(5))
	f.Add([]byte(`{"id":1,"method":"x","params":{"arguments":{"_bir_call_id":1}},"method":"tools/call"}`), uint16(2), uint16(4))
	// A _meta too long to keep, its trace members kept apart.
	f.Add([]byte(`{"id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","p":"`+strings.Repeat("m", 17<<10)+`","tracestate":"a=1"},"arguments":{"_bir_call_id":1}}}`), uint16(9000), uint16(4000))
	f.Fuzz(func(t *testing.T, msg []byte, at, step uint16) {
		var cuts []int
		for p := int(at); p < len(msg) && step > 0; p += int(step) {
			cuts = append(cuts, p)
		}
		checkStreamStrip(t, msg, DefaultCorrelationKey, cuts)
	})
}

// TestStreamedCallKeepsItsTraceParent: a host call long enough to be streamed to the
// server whose params._meta is past the 16 KiB the capture keeps of it lost its
// trace parent: its span started a trace of its own, where the same line read whole
// is the host's span's child. Streamed, whatever the pieces, the span takes from
// _meta what it takes from the whole line: parent, flags, tracestate, or nothing.
func TestStreamedCallKeepsItsTraceParent(t *testing.T) {
	const tp = `"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`
	const tp2 = `"00-11111111111111111111111111111111-2222222222222222-00"`
	pad := `"pad":"` + strings.Repeat("m", 20<<10) + `"`
	metas := []string{
		`{` + pad + `,"traceparent":` + tp + `}`,
		`{"traceparent":` + tp + `,` + pad + `,"tracestate":"a=1,b=2"}`,
		`{"tr\u0061ceparent":` + tp + `,` + pad + `}`,
		`{"traceparent":` + tp + `,` + pad + `,"traceparent":` + tp2 + `}`,
		`{"traceparent":` + tp + `,` + pad + `,"traceparent":{"x":1}}`,
		`{"traceparent":` + tp + `,"n":{"traceparent":` + tp2 + `},` + pad + `}`,
		`{"traceparent":"` + strings.Repeat("0", 300) + `",` + pad + `}`,
		`{"traceparent":` + tp + `,"tracestate":"` + strings.Repeat("a", 1100) + `",` + pad + `}`,
		`{` + pad + `}`,
		`{"traceparent":` + tp + `}`, // short: kept whole as before
	}
	// The span's parent is what telemetry.FromMeta reads of params (telemetry/mcpspans).
	type parent struct {
		tc telemetry.TraceContext
		ok bool
	}
	parentOf := func(params []byte) parent {
		tc, ok := telemetry.FromMeta(params)
		return parent{tc, ok}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i, meta := range metas {
		for _, second := range []string{"", `,"_meta":{"x":1}`} {
			line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":` + meta + second +
				`,"arguments":{"_bir_call_id":"c","big":"` + strings.Repeat("x", 70<<10) + `"}}}`
			whole, _ := strip([]byte(line), DefaultCorrelationKey)
			f, _ := jsonlex.TopFields(whole)
			want := parentOf(f.Params)
			if i == 0 && second == "" && !want.ok {
				t.Fatal("the whole line's span has no parent: the case tests nothing")
			}
			for _, cuts := range [][]int{nil, {1 << 10, 21 << 10}, randomCuts(rng, len(line))} {
				_, _, _, c := streamStripCapture([]byte(line), DefaultCorrelationKey, cuts)
				standIn := []byte(`{"name":"t"}`)
				if c.meta != nil {
					standIn = []byte(`{"name":"t","_meta":` + string(c.meta) + `}`)
				}
				if got := parentOf(standIn); got != want {
					t.Fatalf("_meta %d%s, cuts %v: streamed %+v, whole %+v (kept %.200q)", i, second, cuts, got, want, c.meta)
				}
			}
		}
	}
}
