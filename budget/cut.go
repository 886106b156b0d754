// Package budget keeps a tool's answer within what a host can take (--max-result-tokens,
// docs/budget.md): a tools/call answer whose result is larger than the budget is
// rewritten, by splicing its raw bytes, into one whose result fits, and the answer as
// the server sent it is kept whole in a spill file the last text item names.
//
// Cut is a pure function of the raw answer: what it keeps of the answer (the id, the
// jsonrpc member, text items' heads and tails, small members) is copied byte for byte,
// never decoded and encoded again; what it adds is text items of its own.
package budget

import (
	"encoding/json"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Slack is what a cut result may have past the budget: the braces, separators, the
// stand-ins of removed items past the budget's share and the last note.
const Slack = 1024

// Bounds of what Cut adds, so that a cut result is at most budget + Slack.
const (
	// maxNote is the longest last note, escaped (a longer one is cut).
	maxNote = 640
	// smallMember is the most a member of the result other than content and
	// structuredContent (isError, resultType, an unknown member) may have to be kept;
	// _meta is kept up to a quarter of the budget.
	smallMember = 256
	// tinyMember is the most isError or resultType may have to be kept whatever the
	// budget.
	tinyMember = 64
	// smallItem is the most a non-text item may have to be kept whole when the
	// content does not fit.
	smallItem = 1024
	// textFrame is the most a text item's members other than its text may have to
	// be kept: past it the item is rebuilt as {"type":"text","text":…}.
	textFrame = 512
	// minCut is the least text kept of a text item that is cut (head and tail).
	minCut = 64
)

// Over reports whether msg is a single answer with a result longer than budget bytes.
func Over(msg []byte, budget int) bool {
	f, ok := jsonlex.TopFields(msg)
	return ok && f.ID != nil && f.Method == nil && len(f.Result) > budget
}

// Cut returns msg, a JSON-RPC answer whose result is over budget bytes, rewritten so
// that its result is at most budget+Slack bytes: the same id (its raw bytes) and
// jsonrpc; isError, resultType and _meta as sent (when they fit); text items in order
// with their text cut in the middle, head and tail kept, never inside a UTF-8
// character or an escape; each non-text item that does not fit replaced, in its place,
// by a text item saying what was removed; structuredContent dropped when it does not
// fit; and last a text item saying note (asked only when msg is cut). ok is false, and msg is to pass as it is, when
// msg is not one valid JSON answer with an object result, or its result fits.
func Cut(msg []byte, budget int, note func() string) (out []byte, ok bool) {
	// jsonlex.Valid, not json.Valid: encoding/json stops at 10,000 levels, and a
	// result nested deeper was taken for invalid and passed whole, however long.
	if budget < 0 || !jsonlex.Valid(msg) {
		return nil, false
	}
	return cutDoc(&doc{b: msg}, budget, note)
}

// doc is an answer as Cut reads it: b, its bytes, with the gaps of a long answer
// compacted as it streamed (stream.go): the middles of long strings, left out. A
// length Cut weighs is the answer's own, gaps counted; what it copies lies outside
// them (a string with a gap is longer than anything kept whole).
type doc struct {
	b    []byte
	gaps []gap // by at
}

// gap is n bytes left out of a string body at b[at] (between two of its tokens).
type gap struct{ at, n int }

// size is the length of s, a slice of d.b, in the answer: its bytes and its gaps'.
func (d *doc) size(s []byte) int {
	n := len(s)
	if len(d.gaps) == 0 || len(s) == 0 {
		return n
	}
	off := cap(d.b) - cap(s) // s is d.b[off:…]
	i := sort.Search(len(d.gaps), func(i int) bool { return d.gaps[i].at > off })
	for ; i < len(d.gaps) && d.gaps[i].at < off+len(s); i++ {
		n += d.gaps[i].n
	}
	return n
}

// cutDoc is Cut of the valid answer d.
func cutDoc(d *doc, budget int, note func() string) (out []byte, ok bool) {
	msg := d.b
	start := jsonlex.SkipSpace(msg, 0)
	if start >= len(msg) || msg[start] != '{' {
		return nil, false // a batch, or not an object
	}
	// The top members walked, not listed: an answer of many members costs no record
	// of each.
	var id, rpc, result []byte
	nID, nResult := 0, 0
	other := false
	_, ok = jsonlex.EachMember(msg, start, func(m jsonlex.Member) bool {
		k, v := msg[m.Key.Start:m.Key.End], msg[m.Value.Start:m.Value.End]
		switch {
		case jsonlex.KeyIs(k, "id"):
			id, nID = v, nID+1
		case jsonlex.KeyIs(k, "result"):
			result, nResult = v, nResult+1
		case jsonlex.KeyIs(k, "jsonrpc"):
			rpc = v
		case jsonlex.KeyIs(k, "method"), jsonlex.KeyIs(k, "error"):
			other = true
		}
		return true
	})
	if !ok || other {
		return nil, false
	}
	// Duplicate ids or results: which one a host reads is not sure; left alone.
	if nID != 1 || nResult != 1 || d.size(result) <= budget || result[0] != '{' {
		return nil, false
	}
	res := cutResult(d, result, budget, note())
	out = make([]byte, 0, len(res)+len(id)+len(rpc)+40)
	out = append(out, '{')
	if rpc != nil {
		if len(rpc) > smallMember {
			rpc = []byte(`"2.0"`)
		}
		out = append(append(append(out, `"jsonrpc":`...), rpc...), ',')
	}
	out = append(append(out, `"id":`...), id...)
	out = append(append(append(out, `,"result":`...), res...), '}')
	return out, true
}

// item is one element of content, as Cut sees it.
type item struct {
	raw       []byte
	size      int          // raw's length in the answer
	text      jsonlex.Span // the text literal's span in raw, for a text item
	isText    bool
	textSize  int    // the text literal's length in the answer
	kind      []byte // the type's string literal, for a removed item's stand-in (nil: "item")
	keep      bool   // a non-text item kept whole
	share     int    // the text bytes a text item may keep
	frameless bool   // rebuilt as {"type":"text","text":…}
}

// memberKind is what Cut does with a member of the result.
type memberKind int

const (
	memberOther memberKind = iota
	memberContent
	memberSC // structuredContent
	memberIsError
	memberResultType
)

// keepMember decides the member k: v of the result other than content,
// structuredContent, isError and resultType (of which only the last is kept),
// taking what it keeps from *left; the same walk of the same result decides the
// same (cutResult walks it twice rather than keep a record of each member: a result
// of a million members costs none).
func keepMember(d *doc, k, v []byte, budget int, left *int) (memberKind, bool) {
	size := d.size(k) + 1 + d.size(v) + 1
	switch {
	case jsonlex.KeyIs(k, "content"):
		return memberContent, false // the last one is what a host reads; the others go
	case jsonlex.KeyIs(k, "structuredContent"):
		return memberSC, false
	case jsonlex.KeyIs(k, "isError"):
		// Kept from the Slack when short (a boolean, a word): a host must still
		// tell a failed call.
		return memberIsError, size <= tinyMember
	case jsonlex.KeyIs(k, "resultType"):
		return memberResultType, size <= tinyMember
	case jsonlex.KeyIs(k, "_meta"):
		if size <= budget/4 && size <= *left {
			*left -= size
			return memberOther, true
		}
	default:
		if size <= smallMember && size <= *left {
			*left -= size
			return memberOther, true
		}
	}
	return memberOther, false
}

// cutResult is the result object res cut to budget (+ Slack).
func cutResult(d *doc, res []byte, budget int, note string) []byte {
	left := budget
	var content, sc []byte
	n := 0
	kept := 1 // what the kept members take, with their commas and the closing brace
	// The last isError and resultType (what a host reads) are kept from the Slack,
	// not each: 200 duplicate isError members took a cut result to 3 KB for a
	// budget of 1000 (TestCutDuplicateMembers).
	ks := keptSet{sc: -1, isError: -1, resultType: -1}
	errAt, errLen, typeAt, typeLen, scAt, scLen := -1, 0, -1, 0, -1, 0
	_, ok := jsonlex.EachMember(res, 0, func(m jsonlex.Member) bool {
		k, v := res[m.Key.Start:m.Key.End], res[m.Value.Start:m.Value.End]
		size := 1 + m.Value.End - m.Key.Start
		switch what, keep := keepMember(d, k, v, budget, &left); {
		case what == memberContent:
			content = v
		case what == memberSC:
			sc, scAt, scLen = v, n, size
		case what == memberIsError:
			errAt, errLen = n, size
			if !keep {
				errAt = -1
			}
		case what == memberResultType:
			typeAt, typeLen = n, size
			if !keep {
				typeAt = -1
			}
		case keep:
			kept += size
		}
		n++
		return true
	})
	if !ok {
		return noteOnly(note)
	}
	if errAt >= 0 {
		ks.isError, kept = errAt, kept+errLen
	}
	if typeAt >= 0 {
		ks.resultType, kept = typeAt, kept+typeLen
	}
	// structuredContent is kept when it takes at most half of what is left.
	if scAt >= 0 {
		if size := len(`"structuredContent":`) + d.size(sc) + 1; size <= left/2 {
			ks.sc, left, kept = scAt, left-size, kept+scLen
		}
	}
	var cont []byte
	if content != nil {
		// nil when it would take the result past budget+Slack: it goes whole below.
		cont = cutContent(d, content, left, budget+Slack-len(`{"content":`)-kept, note)
	} else {
		cont = noteItems(nil, note)
	}
	if cont != nil {
		out := make([]byte, 0, len(`{"content":`)+len(cont)+kept)
		out = append(out, `{"content":`...)
		out = append(out, cont...)
		out = appendKept(out, d, res, budget, ks)
		if len(out) <= budget+Slack {
			return out
		}
	}
	// Many small items, each keeping its least, passed the slack: the content goes
	// whole, said in the note (the members kept took at most the budget).
	out := append([]byte(nil), `{"content":`...)
	out = append(out, noteItems(nil, "all content removed to fit the result budget. "+note)...)
	ks.sc = -1
	return appendKept(out, d, res, budget, ks)
}

// keptSet is which structuredContent, isError and resultType members of a result
// are kept, by their place (-1: none).
type keptSet struct{ sc, isError, resultType int }

// appendKept appends the members of res kept (keepMember's, and ks's), and the
// closing brace.
func appendKept(out []byte, d *doc, res []byte, budget int, ks keptSet) []byte {
	left, n := budget, 0
	jsonlex.EachMember(res, 0, func(m jsonlex.Member) bool {
		k, v := res[m.Key.Start:m.Key.End], res[m.Value.Start:m.Value.End]
		what, keep := keepMember(d, k, v, budget, &left)
		if (what == memberOther && keep) || n == ks.sc || n == ks.isError || n == ks.resultType {
			out = append(append(out, ','), res[m.Key.Start:m.Value.End]...)
		}
		n++
		return true
	})
	return append(out, '}')
}

// noteOnly is a result of the note alone.
func noteOnly(note string) []byte {
	return append(append([]byte(`{"content":`), noteItems(nil, note)...), '}')
}

// noteItems is the content array of the items before (raw, comma-separated) and
// the note.
func noteItems(before []byte, note string) []byte {
	b := append([]byte{'['}, before...)
	if len(before) > 0 {
		b = append(b, ',')
	}
	b = textItem(b, note, maxNote)
	return append(b, ']')
}

// textItem appends a text item of s, its text cut to at most max escaped bytes.
func textItem(b []byte, s string, max int) []byte {
	lit := jsonQuote(s)
	if len(lit) > max {
		body := lit[1 : len(lit)-1]
		h := safeBefore(body, max-8)
		lit = append(append(append([]byte{'"'}, body[:h]...), `\u2026`...), '"')
	}
	b = append(b, `{"type":"text","text":`...)
	b = append(b, lit...)
	return append(b, '}')
}

// jsonQuote is s as a JSON string literal (s is the proxy's own text).
func jsonQuote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// readItem is the element raw of content as Cut sees it.
func readItem(d *doc, raw []byte) item {
	it := item{raw: raw, size: d.size(raw)}
	if raw[0] != '{' {
		return it
	}
	// The last type and text members (the duplicate-key rule), walked: an item of
	// many members costs no record of each.
	var t, tx jsonlex.Span
	hasT, hasTx := false, false
	if _, ok := jsonlex.EachMember(raw, 0, func(m jsonlex.Member) bool {
		switch k := raw[m.Key.Start:m.Key.End]; {
		case jsonlex.KeyIs(k, "type"):
			t, hasT = m.Value, true
		case jsonlex.KeyIs(k, "text"):
			tx, hasTx = m.Value, true
		}
		return true
	}); !ok {
		return it
	}
	isTextType := false
	if hasT {
		if lit := raw[t.Start:t.End]; lit[0] == '"' {
			it.kind = lit
			isTextType = jsonlex.KeyIs(lit, "text")
		}
	}
	if hasTx && isTextType && raw[tx.Start] == '"' {
		it.isText, it.text = true, tx
		it.textSize = d.size(raw[tx.Start:tx.End])
		it.frameless = it.size-it.textSize > textFrame
	}
	return it
}

// itemFixed adds to *fixed what the item it takes without its text, and decides
// whether a non-text item is kept whole (while such items take at most a quarter of
// left); scratch is for the stand-in's length.
func itemFixed(it *item, left int, fixed *int, scratch *[]byte) {
	switch {
	case it.isText:
		if it.frameless {
			*fixed += len(`{"type":"text","text":""},`)
		} else {
			*fixed += it.size - it.textSize + 3
		}
	case it.size <= smallItem && *fixed+it.size+1 <= left/4:
		it.keep = true
		*fixed += it.size + 1
	default:
		*scratch = standIn((*scratch)[:0], it)
		*fixed += len(*scratch) + 1
	}
}

// cutContent is the content array arr cut to left bytes, with the note last; nil
// when it would pass limit bytes (cutResult then removes the content whole).
//
// It walks the items twice and keeps no record of each: a first walk sums what they
// take, a second writes them, stopping once past limit. A list of 200,000 small
// items took ~10 times the answer in records and a whole copy
// (TestResultBudgetManyItemsMemory).
func cutContent(d *doc, arr []byte, left, limit int, note string) []byte {
	if len(arr) == 0 || arr[0] != '[' {
		return noteItems(nil, note)
	}
	// What the text items take without their text; the small non-text items are
	// kept whole while they take at most a quarter of what is left; the others get a
	// stand-in.
	var textBytes, fixed int
	var scratch []byte
	jsonlex.EachElement(arr, func(raw []byte) {
		it := readItem(d, raw)
		if it.isText {
			textBytes += it.textSize - 2
		}
		itemFixed(&it, left, &fixed, &scratch)
	})
	// The text left is shared by the text items in proportion to their length, each
	// keeping at least minCut (past the budget: the Slack takes it).
	room := left - fixed
	fixed = 0 // the same walk again decides the same items kept
	b := make([]byte, 0, max(min(left, limit), 0)+Slack)
	b = append(b, '[')
	standIns := 0
	over := false
	jsonlex.EachElement(arr, func(raw []byte) {
		if over {
			return
		}
		it := readItem(d, raw)
		itemFixed(&it, left, &fixed, &scratch)
		switch {
		case it.isText:
			n := it.textSize - 2
			if textBytes > 0 && room > 0 {
				it.share = int(int64(room) * int64(n) / int64(textBytes))
			}
			it.share = max(it.share, min(n, minCut))
			b = appendText(b, &it)
		case it.keep:
			b = append(b, it.raw...)
		default:
			// Past the budget's room, the stand-ins are folded into the note.
			if len(b)+60 > left {
				standIns++
				return
			}
			b = standIn(b, &it)
		}
		b = append(b, ',')
		// What is written stays: past limit, the content cannot fit.
		over = len(b) > limit
	})
	if over {
		return nil
	}
	if standIns > 0 {
		note = strconv.Itoa(standIns) + " more non-text items removed. " + note
	}
	b = textItem(b, note, maxNote)
	return append(b, ']')
}

// standIn appends the text item that stands in the place of the removed item it.
func standIn(b []byte, it *item) []byte {
	kind := "item"
	if it.kind != nil {
		kind = jsonlex.StringOf(it.kind)
	}
	if len(kind) > 32 {
		kind = kind[:32]
	}
	kind = string(jsonQuote(kind))
	kind = kind[1 : len(kind)-1]
	// kind is escaped already: written into a literal of the proxy's own.
	b = append(b, `{"type":"text","text":"[bir-proxy: removed a `...)
	b = append(b, safeString(kind)...)
	b = append(b, ` item of `...)
	b = strconv.AppendInt(b, int64(it.size), 10)
	return append(b, ` bytes to fit the result budget]"}`...)
}

// safeString is s, an escaped JSON string body, cut back to a whole escape and
// character.
func safeString(s string) string { return s[:safeBefore([]byte(s), len(s))] }

// appendText appends the text item it, its text cut to its share.
func appendText(b []byte, it *item) []byte {
	lit := it.raw[it.text.Start:it.text.End]
	body := lit[1 : len(lit)-1]
	// n is the body's length in the answer; body may have a gap (stream.go), past
	// its head and before its tail, and both are longer than what is kept of them:
	// its tokens are the answer's, offsets past the gap shifted by gap.
	n := it.textSize - 2
	gap := n - len(body)
	var pre, post []byte
	if it.frameless {
		pre, post = []byte(`{"type":"text","text":`), []byte(`}`)
	} else {
		pre, post = it.raw[:it.text.Start], it.raw[it.text.End:]
	}
	b = append(b, pre...)
	b = append(b, '"')
	if n <= it.share {
		b = append(b, body...)
	} else {
		marker := "\\n[\u2026 bir-proxy: " + strconv.Itoa(n) + " bytes of text cut to fit the result budget \u2026]\\n"
		keep := max(it.share-len(marker), minCut)
		h := safeBefore(body, keep/2)
		t := safeAfter(body, n-gap-(keep-keep/2))
		if t < h {
			t = h
		}
		b = append(b, body[:h]...)
		b = append(b, marker...)
		b = append(b, body[t:]...)
	}
	b = append(b, '"')
	return append(b, post...)
}

// tokenEnd is where the token of the escaped string body at i ends: an escape (a
// surrogate pair's two as one), a UTF-8 character, or one byte that is neither.
func tokenEnd(body []byte, i int) int {
	c := body[i]
	if c == '\\' {
		if i+1 < len(body) && body[i+1] == 'u' && i+6 <= len(body) {
			if high(body[i+2:i+6]) && i+12 <= len(body) && body[i+6] == '\\' && body[i+7] == 'u' && low(body[i+8:i+12]) {
				return i + 12
			}
			return i + 6
		}
		return min(i+2, len(body))
	}
	if c < utf8.RuneSelf {
		return i + 1
	}
	_, w := utf8.DecodeRune(body[i:])
	return i + w
}

// high and low report whether the four hex digits h are a high or low surrogate.
func high(h []byte) bool { return surrogate(h, '8', 'b') }
func low(h []byte) bool  { return surrogate(h, 'c', 'f') }
func surrogate(h []byte, from, to byte) bool {
	if h[0] != 'd' && h[0] != 'D' {
		return false
	}
	c := h[1] | 0x20
	return c >= from && c <= to
}

// safeBefore is the last token boundary of body at or before n.
func safeBefore(body []byte, n int) int {
	if n <= 0 {
		return 0
	}
	i := 0
	for i < len(body) {
		j := tokenEnd(body, i)
		if j > n {
			break
		}
		i = j
	}
	return i
}

// safeAfter is the first token boundary of body at or after n.
func safeAfter(body []byte, n int) int {
	i := 0
	for i < len(body) && i < n {
		i = tokenEnd(body, i)
	}
	return i
}
