package budget

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// checkCut asserts what every cut answer must be: valid JSON, valid UTF-8 when the
// answer was, the same raw id, a result within budget+Slack.
func checkCut(t *testing.T, msg []byte, budget int, out []byte) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("not valid JSON: %.300q", out)
	}
	if utf8.Valid(msg) && !utf8.Valid(out) {
		t.Fatalf("not valid UTF-8: %.300q", out)
	}
	var a, b struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	json.Unmarshal(msg, &a)
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.ID, b.ID) {
		t.Fatalf("id %s became %s", a.ID, b.ID)
	}
	if len(b.Result) > budget+Slack {
		t.Fatalf("result of %d bytes, budget %d", len(b.Result), budget)
	}
}

func answer(id, result string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`)
}

func TestCutText(t *testing.T) {
	// Multi-byte characters, escapes and surrogate pairs everywhere, so that the cut
	// lands among them.
	unit := `héllo \"wörld\" \u00e9 \ud83d\ude00 日本語 \\ \n 😀 `
	body := strings.Repeat(unit, 1<<20/len(unit))
	msg := answer(`"a\u0062c"`, `{"content":[{"type":"text","text":"HEAD`+body+`TAIL"}],"isError":true,"_meta":{"k":1},"resultType":"x"}`)
	for _, budget := range []int{0, 1, 100, 1000, 4096, 10007, 100000} {
		out, ok := Cut(msg, budget, func() string { return "see /tmp/x" })
		if !ok {
			t.Fatal("not cut")
		}
		checkCut(t, msg, budget, out)
		var r struct {
			Result struct {
				Content []struct{ Type, Text string }
				IsError *bool           `json:"isError"`
				Meta    json.RawMessage `json:"_meta"`
				RT      string          `json:"resultType"`
			}
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatal(err)
		}
		c := r.Result.Content
		if len(c) != 2 || !strings.HasPrefix(c[0].Text, "HEAD") || !strings.HasSuffix(c[0].Text, "TAIL") || c[1].Text != "see /tmp/x" {
			t.Fatalf("budget %d: content %.200q", budget, c)
		}
		if r.Result.IsError == nil || !*r.Result.IsError || r.Result.RT != "x" {
			t.Fatalf("budget %d: isError/resultType lost: %.300s", budget, out)
		}
		if budget >= 100 && string(r.Result.Meta) != `{"k":1}` {
			t.Fatalf("budget %d: _meta lost: %.300s", budget, out)
		}
	}
}

func TestCutNonText(t *testing.T) {
	img := `{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("QUFB", 75000) + `"}`
	msg := answer(`7`, `{"content":[{"type":"text","text":"before"},`+img+`,{"type":"text","text":"after"}],"structuredContent":{"big":"`+strings.Repeat("x", 200000)+`"}}`)
	out, ok := Cut(msg, 10000, func() string { return "note" })
	if !ok {
		t.Fatal("not cut")
	}
	checkCut(t, msg, 10000, out)
	var r struct {
		Result struct {
			Content []struct{ Type, Text string }
			SC      json.RawMessage `json:"structuredContent"`
		}
	}
	json.Unmarshal(out, &r)
	c := r.Result.Content
	if len(c) != 4 || c[0].Text != "before" || !strings.Contains(c[1].Text, "removed a image item of 300") || c[2].Text != "after" || c[3].Text != "note" || r.Result.SC != nil {
		t.Fatalf("%.500s", out)
	}
}

func TestCutLeavesAlone(t *testing.T) {
	for _, msg := range []string{
		string(answer(`1`, `{"content":[]}`)),
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"` + strings.Repeat("x", 5000) + `"}}`,
		`[` + string(answer(`1`, `{"content":[{"type":"text","text":"`+strings.Repeat("x", 5000)+`"}]}`)) + `]`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 5000) + `}]}}`,
	} {
		if out, ok := Cut([]byte(msg), 100, func() string { return "n" }); ok {
			t.Errorf("cut %.80q into %.80q", msg, out)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add(answer(`1`, `{"content":[{"type":"text","text":"a\u00e9\ud83d\ude00😀\\\"b"}],"structuredContent":{"a":1}}`), 5)
	f.Add(answer(`"x"`, `{"content":[{"type":"image","data":"AAAA"},{"type":"resource","resource":{"blob":"AAAA"}},1,"s",{"type":"text","text":""}],"_meta":{},"isError":false}`), 3)
	f.Add(answer(`1`, `{"content":[`+strings.Repeat(`{"type":"text","text":"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789"},`, 300)+`1]}`), 10)
	f.Add(answer(`1`, `{"content":[{"type":"text","text":"abcdefghijklmnopqrstuvwxyz"}]`+strings.Repeat(`,"isError":true,"resultType":"x"`, 40)+`}`), 3)
	f.Fuzz(func(t *testing.T, msg []byte, budget int) {
		budget = budget & 0xffff
		out, ok := Cut(msg, budget, func() string { return "the whole answer: /tmp/é" })
		if !ok {
			return
		}
		checkCut(t, msg, budget, out)
	})
}

// TestCutDeepResult: a result holding a member nested past encoding/json's 10,000
// levels was taken for invalid JSON and passed whole, however long (a hostile
// server's way past the budget). It is cut like any other.
func TestCutDeepResult(t *testing.T) {
	const depth = 20_000
	msg := answer("1", `{"content":[{"type":"text","text":"`+strings.Repeat("a", 100_000)+`"}],"x":`+
		strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}`)
	out, ok := Cut(msg, 400, func() string { return "cut" })
	if !ok {
		t.Fatal("a valid answer nested 20,000 deep passed uncut")
	}
	if !jsonlex.Valid(out) || !bytes.HasPrefix(out, []byte(`{"jsonrpc":"2.0","id":1,`)) || len(out) > 400+Slack+200 {
		t.Fatalf("cut to %d bytes: %.300q", len(out), out)
	}
}

// TestCutDuplicateMembers: of duplicate isError and resultType members (kept from
// the Slack, whatever the budget) only the last, what a host reads, is kept: each
// one kept, 200 pairs took the result to 8 KB for a budget of 1000.
func TestCutDuplicateMembers(t *testing.T) {
	msg := answer(`1`, `{"content":[{"type":"text","text":"`+strings.Repeat("a", 5000)+`"}]`+
		strings.Repeat(`,"isError":false,"resultType":"complete"`, 200)+`,"isError":true}`)
	out, ok := Cut(msg, 1000, func() string { return "n" })
	if !ok {
		t.Fatal("not cut")
	}
	checkCut(t, msg, 1000, out)
	if !bytes.HasSuffix(out, []byte(`,"resultType":"complete","isError":true}}`)) || bytes.Count(out, []byte(`"isError"`)) != 1 {
		t.Errorf("the members kept: %s", out[max(0, len(out)-200):])
	}
}

// manyItems is an answer of about size bytes of small text items.
func manyItems(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"content":[`)
	for i := 0; sb.Len() < size; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"type":"text","text":"item `)
		sb.WriteString(strconv.Itoa(i))
		sb.WriteString(`: a small text of a long list"}`)
	}
	sb.WriteString(`],"isError":false}}`)
	return []byte(sb.String())
}

// TestCutManyItemsHoldsLittle: an answer of many small items is cut with no record
// of each item and no copy of them all: Cut of a 4 MiB answer of ~70,000 items
// allocates a few budgets, where it took ~11 times the answer.
func TestCutManyItemsHoldsLittle(t *testing.T) {
	msg := manyItems(4 << 20)
	for _, budget := range []int{1000, 40000} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		out, ok := Cut(msg, budget, func() string { return "see /tmp/x" })
		runtime.ReadMemStats(&after)
		if !ok {
			t.Fatal("not cut")
		}
		checkCut(t, msg, budget, out)
		if n := after.TotalAlloc - before.TotalAlloc; n > uint64(4*(budget+Slack)+64<<10) {
			t.Errorf("budget %d: Cut of a %d-byte answer of many items allocated %d bytes", budget, len(msg), n)
		}
	}
}

func BenchmarkCutManyItems(b *testing.B) {
	msg := manyItems(19 << 20)
	b.ReportAllocs()
	for b.Loop() {
		Cut(msg, 4000, func() string { return "see /tmp/x" })
	}
}
