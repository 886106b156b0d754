package relay

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
)

// TestResultDigestOfHostileShapes: answers spelt the ways a hostile server may spell
// them (escaped member names, whitespace everywhere, duplicates of every member in
// either order, results that are not objects, "result" and "isError" nested where
// they mean nothing, an error of null) reduce to what the whole answer gives, in any
// pieces.
func TestResultDigestOfHostileShapes(t *testing.T) {
	pad := strings.Repeat(`x\"y\\z{}[],:`, 50)
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"r\u0065sult":{"is\u0045rror":true,"content":"` + pad + `"}}`,
		`{"jsonrpc":"2.0","id":1,"result" : { "isError" : true , "resultType" : "input_required" } }`,
		"{\"id\":1,\r\n\t\"result\"\t:\n5\n}",
		`{"id":1,"result":-1.5e+300}`,
		`{"id":1,"result":true,"error":null}`,
		`{"id":1,"error":null,"result":{"isError":true}}`,
		`{"id":1,"error":{"code":1},"result":{"a":"` + pad + `"},"error":{"code":2,"message":"last"}}`,
		`{"id":1,"result":{"content":[{"result":{"isError":true}}],"x":{"isError":true}}}`,
		`{"id":1,"result":{"isError":"true","resultType":"input_requir\u0065d"}}`,
		`{"id":1,"result":{"resultType":"input_required","resultType":null}}`,
		`{"id":1,"result":{"\u0069\u0073\u0045\u0072\u0072\u006f\u0072":true}}`,
		`{"id":1,"result":{"\u0072\u0065\u0073\u0075\u006c\u0074\u0054\u0079\u0070\u0065":"input_required"}}`,
		`{"id":1,"result":{"isError":true},"result":"` + pad + `"}`,
		`{"id":1,"result":"` + pad + `","result":{"isError":true}}`,
		`{"id":1,"result":[],"id":2}`,
		`{"id":1,"result":{}}`,
		`{"id":1,"result":""}`,
		`{"id":1,"result":null}`,
		`{"id":1,"error":"a string error ghp_0123456789abcdefghijklmnopqrstuvwxyz"}`,
		`{"id":1,"error":{"code":-32000,"message":"m","data":[` + strings.Repeat(`{"k":"v"},`, 300) + `1]}}`,
		`{"id":1,"result":{"content":[{"type":"text","text":"{\"token\":\"ghp_0123456789abcdefghijklmnopqrstuvwxyz\"}"}]}}`,
	}
	var queued atomic.Int64
	for _, m := range msgs {
		if !json.Valid([]byte(m)) {
			t.Fatalf("the test's answer is not JSON: %s", m)
		}
		for _, chunk := range []int{1, 2, 3, 5, 64, 1 << 20} {
			sameAsWhole(t, []byte(m), digestOf([]byte(m), chunk, &queued), 4096)
		}
	}
	if n := queued.Load(); n != 0 {
		t.Fatalf("%d bytes counted as queued after every digest ended", n)
	}
}

// TestResultDigestKeepsALongErrorsCode: an error value too long to keep is reported
// as not recorded, but its code, which tracing's error.type and rpc code are (and the
// report's error shows), is the server's: a span of the same answer read whole said
// -32603 where the streamed one said _OTHER.
func TestResultDigestKeepsALongErrorsCode(t *testing.T) {
	long := strings.Repeat("e", maxErrorKept)
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"` + long + `"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"message":"` + long + `","data":1,"code":-32603}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":5,"message":"` + long + `","code":-32603}}`,
	} {
		e := digestOf([]byte(m), 4096, new(atomic.Int64)).Error()
		if !json.Valid(e) {
			t.Fatalf("the error stand-in is not JSON: %s", e)
		}
		if c := jsonlex.Get(e, "code"); string(c) != "-32603" {
			t.Errorf("the stand-in of a %d-byte error has code %s, want the server's -32603: %.200s", len(m), c, e)
		}
		if msg := jsonlex.StringOf(jsonlex.Get(e, "message")); !strings.Contains(msg, "not recorded") {
			t.Errorf("the stand-in says %q, want that it was not recorded", msg)
		}
	}
	// A code that is no number is not kept: the whole answer's report shows it
	// redacted, and a stand-in has no room for a second value of the server's.
	e := digestOf([]byte(`{"id":1,"error":{"code":"ghp_0123456789abcdefghijklmnopqrstuvwxyz","message":"`+long+`"}}`), 4096, new(atomic.Int64)).Error()
	if bytes.Contains(e, []byte("ghp_")) || !json.Valid(e) {
		t.Errorf("a long error's string code came through its stand-in: %.200s", e)
	}
}

// TestResultDigestThatFellBehindInAnErrorShowsNoFragment: when the pump drops the
// rest of an answer in the middle of its error, what was read of the error is a
// fragment: a secret cut there is no longer one the redaction rules know, and went
// into the report as text. The error is reported as not recorded instead.
func TestResultDigestThatFellBehindInAnErrorShowsNoFragment(t *testing.T) {
	secret := "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
	// The head is a queue entry of its own (digestChunk), read; the rest is dropped.
	head := `{"jsonrpc":"2.0","id":1,"pad":"` + strings.Repeat("p", digestChunk) + `","error":{"code":-32000,"message":"token ` + secret[:12]
	msg := head + secret[12:] + `","data":"` + strings.Repeat("d", 1000) + `"}}`
	var queued atomic.Int64
	queued.Store(maxResultsQueued - int64(len(head))) // others waiting: only the head fits
	d := digestOf([]byte(msg), len(head), &queued)
	e := d.Error()
	if e == nil {
		return // nothing of it said (outcome as for an answer whose error was not read)
	}
	if !json.Valid(e) || bytes.Contains(e, []byte(secret[:8])) {
		t.Fatalf("the error of an answer that fell behind is %q: a fragment of what the server sent", e)
	}
	if red, _ := redact.Report(e, 4096); bytes.Contains(red, []byte(secret[:8])) {
		t.Fatalf("its report shows the fragment: %s", red)
	}
	if n := queued.Load(); n != maxResultsQueued-int64(len(head)) {
		t.Fatalf("queued %d after the digest, want the others' %d", n, maxResultsQueued-int64(len(head)))
	}
}

// TestResultDigestWithItsQueueFullEnds: an answer in more pieces than the queue has
// slots, faster than they are read, drops the rest rather than wait, hands its end
// over all the same (the goroutine that does so ends), and gives back every byte it
// counted.
func TestResultDigestWithItsQueueFullEnds(t *testing.T) {
	var queued atomic.Int64
	piece := bytes.Repeat([]byte("a"), digestChunk)
	var ds []*resultDigest
	for range 4 {
		d := newResultDigest(&queued)
		d.add([]byte(`{"jsonrpc":"2.0","id":1,"result":"`), true)
		for range 600 {
			d.add(piece, false)
		}
		d.add([]byte(`"}`), false)
		d.finish()
		ds = append(ds, d)
	}
	for _, d := range ds {
		if r, clipped := d.Report(4096); !clipped || r == nil {
			t.Fatalf("report %.200s (clipped %v)", r, clipped)
		}
	}
	if n := queued.Load(); n != 0 {
		t.Fatalf("%d bytes counted as queued after every digest ended", n)
	}
}
