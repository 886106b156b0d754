package report

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestAppendJSONMatchesEncodingJSON: the hand-written encoder makes the document
// encoding/json makes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "plain", "quote \" back \\ slash", "ctl \x00\x01\x1f\t\n\r", "é中😀", "bad \xff\xfe utf8", "line\u2028sep\u2029", "<html>&amp;"}
	raws := []string{``, `{}`, `{"a":1,"b":[1,2,{"c":null}]}`, `{ "spaced" : [ 1 , 2 ] }`, "{\n \"lines\": [1,\r\n2]}", `"text"`, `9007199254740993`, `{"bad":}`}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	for i := 0; i < 2000; i++ {
		id := pick(strs)
		s := Step{
			ProxyID: pick(strs), Server: pick(strs), Seq: r.Uint64(), Tool: pick(strs),
			Args: json.RawMessage(pick(raws)), ArgsFingerprint: pick(strs), ArgsClipped: r.IntN(2) == 0,
			ReceivedAt: time.Unix(0, r.Int64()), StartedAt: time.Unix(r.Int64N(1e10), 0).In(time.FixedZone("x", 3600)),
			EndedAt: time.Now(), DurationMs: float64(r.IntN(1e9)) / 1000, Outcome: pick(strs),
			Result: json.RawMessage(pick(raws)), ResultClipped: r.IntN(2) == 0, Error: json.RawMessage(pick(raws)),
		}
		if r.IntN(2) == 0 {
			s.CallID = &id
		}
		if r.IntN(2) == 0 {
			s.ResultBytes = r.Int64N(1 << 40)
		}
		if r.IntN(2) == 0 {
			s.Rounds, s.TaskID, s.TaskStatus = r.IntN(3), pick(strs), pick(strs)
		}
		if r.IntN(2) == 0 {
			s.Trimmed, s.Spill = r.IntN(2) == 0, pick(strs)
		}
		got := s.AppendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		// Raw fields that are valid and on one line, said to be so, are copied to the
		// same document.
		checked := s
		checked.RawChecked = true
		for _, raw := range []*json.RawMessage{&checked.Args, &checked.Result, &checked.Error} {
			if len(*raw) > 0 && (!json.Valid(*raw) || bytes.ContainsAny(*raw, "\r\n")) {
				*raw = json.RawMessage(`"x"`)
			}
		}
		unchecked := checked
		unchecked.RawChecked = false
		if a, b := checked.AppendJSON(nil), unchecked.AppendJSON(nil); !bytes.Equal(a, b) {
			t.Fatalf("RawChecked changes the document:\n%s\n%s", a, b)
		}
		// encoding/json's document for the same report, raw fields made valid first.
		w := s
		w.ReceivedAt, w.StartedAt, w.EndedAt = w.ReceivedAt.UTC(), w.StartedAt.UTC(), w.EndedAt.UTC()
		for _, raw := range []*json.RawMessage{&w.Args, &w.Result, &w.Error} {
			if len(*raw) > 0 && !json.Valid(*raw) {
				*raw = json.RawMessage(`"[not valid JSON; omitted]"`)
			}
		}
		if len(w.Args) == 0 {
			w.Args = json.RawMessage(`null`)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(w); err != nil {
			t.Fatal(err)
		}
		var gotC, wantC bytes.Buffer
		json.Compact(&gotC, got)
		json.Compact(&wantC, want.Bytes())
		if bytes.IndexByte(got, '\n') >= 0 || gotC.String() != wantC.String() {
			t.Fatalf("documents differ:\n got %s\nwant %s", got, want.Bytes())
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	id := "c-42"
	s := Step{ProxyID: "6f1c0123456789abcdef0123456789ab", Server: "github", Seq: 17, CallID: &id, Tool: "create_issue",
		Args: json.RawMessage(`{"title":"hello","body":"a longer body of text"}`), ArgsFingerprint: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		ReceivedAt: time.Now(), StartedAt: time.Now(), EndedAt: time.Now(), DurationMs: 183.4, Outcome: "ok",
		Result: json.RawMessage(`{"content":[{"type":"text","text":"created issue #12"}]}`)}
	for b.Loop() {
		s.AppendJSON(make([]byte, 0, 512))
	}
}
