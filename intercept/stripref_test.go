package intercept

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// The key strip as it was before the host's path lexed each message once (three
// walks of it: EachObject, then each object's members, then the registry's and
// revival's own): the reference stripLexed must agree with, byte for byte.

// strip removes every top-level member of params.arguments named key from each
// tools/call request in msg (a single message or a batch), in place, and says what
// the message holds. Every other byte stays as it was. A message it cannot follow is
// returned unchanged: the upstream answers it with a parse error, which is the
// host's business.
func stripRef(msg []byte, key string) ([]byte, hostScan) {
	var sc hostScan
	var dels []jsonlex.Span
	// A line should hold one value, but a server reading stdin with a streaming
	// decoder would act on a second one too, so every object on the line is looked at.
	jsonlex.EachObject(msg, func(obj jsonlex.Span) {
		dels = scanRequestRef(msg, obj.Start, key, &sc, dels)
	})
	return splice(msg, dels), sc
}

// scanRequest looks at the object at msg[i] and appends the spans to delete.
func scanRequestRef(msg []byte, i int, key string, sc *hostScan, dels []jsonlex.Span) []jsonlex.Span {
	// The method the upstream acts on is the last "method" member (JSON parsers keep
	// the last duplicate), and bookkeeping follows it; but the key is removed if any
	// "method" member says tools/call, so no parser, whatever it does with
	// duplicates, can see it.
	anyCall, hasID := false, false
	var method []byte
	var paramsBuf [2]jsonlex.Span
	params := paramsBuf[:0]
	_, ok := jsonlex.EachMember(msg, i, func(m jsonlex.Member) bool {
		k := msg[m.Key.Start:m.Key.End]
		switch {
		case jsonlex.KeyIs(k, "params"):
			if msg[m.Value.Start] == '{' {
				params = append(params, m.Value)
			}
		case jsonlex.KeyIs(k, "method"):
			method = msg[m.Value.Start:m.Value.End]
			anyCall = anyCall || jsonlex.KeyIs(method, "tools/call")
		case jsonlex.KeyIs(k, "id"):
			hasID = true
		}
		return true
	})
	if !ok {
		return dels
	}
	switch {
	case method == nil:
	case jsonlex.KeyIs(method, "tools/call"):
		sc.want |= wantCall
		sc.awaiting++
		if !hasID {
			sc.ends = true // a notification: no answer will come to end it
		}
	case jsonlex.KeyIs(method, "notifications/cancelled"):
		sc.want |= wantCancel
		sc.ends = true
	case jsonlex.KeyIs(method, "initialize"), jsonlex.KeyIs(method, "tools/list"), jsonlex.KeyIs(method, "server/discover"):
		sc.want |= wantHandshake
		if hasID {
			sc.awaiting++
		}
	}
	if !anyCall {
		return dels
	}
	var callID *string
	var argsBuf [16]jsonlex.Member
	for _, p := range params {
		jsonlex.EachMember(msg, p.Start, func(a jsonlex.Member) bool {
			if !jsonlex.KeyIs(msg[a.Key.Start:a.Key.End], "arguments") || msg[a.Value.Start] != '{' {
				return true
			}
			ams := argsBuf[:0]
			if _, ok := jsonlex.EachMember(msg, a.Value.Start, func(m jsonlex.Member) bool {
				ams = append(ams, m)
				return true
			}); !ok {
				return true
			}
			var id *string
			dels, id = deleteKeyRef(msg, ams, key, dels)
			if id != nil {
				callID = id // the last occurrence wins, as in the host's JSON.parse
			}
			return true
		})
	}
	if jsonlex.KeyIs(method, "tools/call") {
		sc.callIDs = append(sc.callIDs, callID)
	}
	return dels
}

// deleteKey appends the spans that remove every member of ams named key, together
// with the separators that would otherwise be left dangling, and returns the value of
// the last such member.
func deleteKeyRef(msg []byte, ams []jsonlex.Member, key string, dels []jsonlex.Span) ([]jsonlex.Span, *string) {
	var callID *string
	n := len(ams)
	for a := 0; a < n; {
		if !jsonlex.KeyIs(msg[ams[a].Key.Start:ams[a].Key.End], key) {
			a++
			continue
		}
		// A run of removed members a..b-1.
		b := a
		for b < n && jsonlex.KeyIs(msg[ams[b].Key.Start:ams[b].Key.End], key) {
			callID = valueText(msg, ams[b].Value)
			b++
		}
		switch {
		case b < n:
			// A kept member follows: remove up to its key, taking our commas.
			dels = append(dels, jsonlex.Span{Start: ams[a].Key.Start, End: ams[b].Key.Start})
		case a > 0:
			// The run ends the object: remove from the end of the kept member before
			// it, taking the comma that separated them.
			dels = append(dels, jsonlex.Span{Start: ams[a-1].Value.End, End: ams[n-1].Value.End})
		default:
			// Every member goes: "{ ... }" keeps only its braces and outer spacing.
			dels = append(dels, jsonlex.Span{Start: ams[0].Key.Start, End: ams[n-1].Value.End})
		}
		a = b
	}
	return dels, callID
}

// stripAgrees checks strip (one Lex, shared) against stripRef on in: the same bytes
// out, the same scan, and a Line that, shifted by the strip, is the Line of the output.
func stripAgrees(t *testing.T, in []byte) {
	t.Helper()
	wantOut, wantSc := stripRef(append([]byte(nil), in...), DefaultCorrelationKey)
	var lx jsonlex.Line
	lx.Lex(in)
	out, sc := stripLexed(append([]byte(nil), in...), DefaultCorrelationKey, &lx, true)
	if string(out) != string(wantOut) || scanString(sc) != scanString(wantSc) {
		t.Fatalf("strip(%q):\n got %q %s\nwant %q %s", in, out, scanString(sc), wantOut, scanString(wantSc))
	}
	var fresh jsonlex.Line
	fresh.Lex(out)
	if fmt.Sprint(lineSpans(&lx)) != fmt.Sprint(lineSpans(&fresh)) {
		t.Fatalf("strip(%q): shifted lex %v, the output's %v", in, lineSpans(&lx), lineSpans(&fresh))
	}
	// A pure pipe (no ids wanted) edits the same bytes.
	lx.Lex(in)
	if out2, _ := stripLexed(append([]byte(nil), in...), DefaultCorrelationKey, &lx, false); string(out2) != string(wantOut) {
		t.Fatalf("strip(%q) without ids: %q, want %q", in, out2, wantOut)
	}
}

// lineSpans is what Shift keeps of a Line: every span, and which objects EachRPC shows.
func lineSpans(l *jsonlex.Line) [][6]jsonlex.Span {
	var out [][6]jsonlex.Span
	for _, o := range l.Objs {
		out = append(out, [6]jsonlex.Span{o.Span, o.Method, o.ID, o.Params, o.Result, o.Error})
	}
	return append(out, [6]jsonlex.Span{{Start: len(l.RPC())}})
}

func scanString(sc hostScan) string {
	s := fmt.Sprintf("want=%d awaiting=%d ends=%v ids=[", sc.want, sc.awaiting, sc.ends)
	for _, id := range sc.callIDs {
		if id == nil {
			s += "nil "
		} else {
			s += fmt.Sprintf("%q ", *id)
		}
	}
	return s + "]"
}

func TestStripAgreesWithReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		line, _ := randomCall(r)
		stripAgrees(t, []byte(line))
		// As a batch, beside other messages, and twice on a line.
		stripAgrees(t, []byte(`[`+line+`,{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}},`+line+`]`))
		stripAgrees(t, []byte(line+` `+line))
	}
	for _, s := range []string{
		`{"method":"tools/call","method":"x","params":{"arguments":{"_bir_call_id":"a"}}}`,
		`{"method":"x","method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}},"params":{"arguments":{"_bir_call_id":"b","k":1}}}`,
		`{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"},"arguments":{"_bir_call_id":"b"}}}`,
		`{"method":"tools/call","params":[1]}`, `{"method":"tools/call"}`, `{"method":"initialize","id":1}`,
		`{"id" 1} {"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}}`,
		`[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}} {"id":2}]`,
	} {
		stripAgrees(t, []byte(s))
	}
}

func FuzzStripAgreesWithReference(f *testing.F) {
	// Nesting depth: arguments nested 100,000 levels (the strip must not recurse).
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"_bir_call_id":"a","x":` + strings.Repeat(`[`, 100000) + strings.Repeat(`]`, 100000) + `}}}`))

	r := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		line, _ := randomCall(r)
		f.Add([]byte(line))
	}
	f.Add([]byte(`[{"method":"tools/call","params":{"arguments":{"_bir_call_id":"a"}}},{"method":"tools/call","method":"x"}]`))
	f.Fuzz(func(t *testing.T, in []byte) { stripAgrees(t, in) })
}
