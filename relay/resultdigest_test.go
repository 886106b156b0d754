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

// digestOf reduces msg given in pieces of chunk bytes.
func digestOf(msg []byte, chunk int, queued *atomic.Int64) *resultDigest {
	d := newResultDigest(queued)
	d.add(nil, true)
	for i := 0; i < len(msg); i += chunk {
		d.add(msg[i:min(i+chunk, len(msg))], false)
	}
	d.finish()
	return d
}

// wholeKind is what intercept's resultKind reads of a whole result.
func wholeKind(result []byte) (inputRequired, isError bool) {
	if len(result) == 0 || result[0] != '{' {
		return false, false
	}
	if _, ok := jsonlex.EachMember(result, 0, func(jsonlex.Member) bool { return true }); !ok {
		return false, false
	}
	return jsonlex.StringOf(jsonlex.Get(result, "resultType")) == "input_required", string(jsonlex.Get(result, "isError")) == "true"
}

// sameAsWhole checks d against what the whole message msg gives.
func sameAsWhole(t testing.TB, msg []byte, d *resultDigest, budget int) {
	t.Helper()
	f, ok := jsonlex.TopFields(msg)
	if !ok {
		return
	}
	wi, we := wholeKind(f.Result)
	if gi, ge := d.Kind(); gi != wi || ge != we {
		t.Fatalf("kind (input %v, error %v), whole (%v, %v) of %.200q", gi, ge, wi, we, msg)
	}
	if e := d.Error(); len(f.Error) <= maxErrorKept && !bytes.Equal(e, f.Error) {
		t.Fatalf("error %.200q, whole %.200q", e, f.Error)
	}
	wantN := len(f.Result)
	if f.Error != nil {
		wantN = len(f.Error) // the call is an rpc_error: its error is what came back
	}
	if n := d.ResultBytes(); n != int64(wantN) {
		t.Fatalf("result bytes %d, whole %d of %.200q", n, wantN, msg)
	}
	gr, gc := d.Report(budget)
	if f.Result == nil {
		if gr != nil {
			t.Fatalf("no result, yet a report %.200q", gr)
		}
		return
	}
	wr, wc := redact.Report(f.Result, budget)
	if !bytes.Equal(gr, wr) || gc != wc {
		t.Fatalf("report %.300s (%v), whole %.300s (%v) of %.200q", gr, gc, wr, wc, msg)
	}
	// A second report (tracing's capture, then the step's) is the same.
	if again, _ := d.Report(budget); !bytes.Equal(again, gr) {
		t.Fatalf("a second report %.200s differs from the first %.200s", again, gr)
	}
}

// TestResultDigestIsTheWholeAnswer: a long answer in pieces, reduced off the pump,
// gives the report's result, error and kind the whole answer gives, for each shape.
func TestResultDigestIsTheWholeAnswer(t *testing.T) {
	text := strings.Repeat(`0123456789abcdef \"quoted\" \\ `, 20000)
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"password: hunter2 ` + text + `"}],"isError":true}}`,
		`{"jsonrpc":"2.0","result":{"resultType":"input_required","x":"` + text + `"},"id":"z"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + `"}]},"result":{"content":[],"isError":false}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":{"token":"ghp_0123456789abcdefghijklmnopqrstuvwxyz"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":"` + text + `"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[1,2,{"isError":true}]},"error":{"code":5,"message":"both"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"isError":true,"isError":false}}`,
		`{"jsonrpc":"2.0","id":1}`,
	}
	var queued atomic.Int64
	for _, m := range msgs {
		for _, chunk := range []int{1 << 20, 4096, 7} {
			if chunk == 7 && len(m) > 1<<16 {
				continue
			}
			sameAsWhole(t, []byte(m), digestOf([]byte(m), chunk, &queued), 4096)
		}
	}
	if n := queued.Load(); n != 0 {
		t.Fatalf("%d bytes still counted as queued after every digest ended", n)
	}
}

// TestResultDigestThatFellBehindSaysSo: past what may wait, together, for every long
// answer's reduction, the rest is dropped rather than waited for, and the report
// says the result was not recorded; what was counted is given back.
func TestResultDigestThatFellBehindSaysSo(t *testing.T) {
	var queued atomic.Int64
	queued.Store(maxResultsQueued - 10) // other answers waiting
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 100) + `"}]}}`)
	d := digestOf(msg, 50, &queued)
	r, clipped := d.Report(4096)
	// Nothing of it was read: its size is every byte that passed unread.
	if n := d.ResultBytes(); n != int64(len(msg)) {
		t.Fatalf("result bytes %d of an answer that went by unread, want the %d that passed", n, len(msg))
	}
	if !clipped || !bytes.Contains(r, []byte("not recorded")) {
		t.Fatalf("report %s (clipped %v), want one saying the result was not recorded", r, clipped)
	}
	if n := queued.Load(); n != maxResultsQueued-10 {
		t.Fatalf("queued %d after the digest, want the others' %d", n, maxResultsQueued-10)
	}
	big := `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"` + strings.Repeat("e", maxErrorKept) + `"}}`
	e := digestOf([]byte(big), 1<<16, new(atomic.Int64)).Error()
	var got struct{ Message string }
	if json.Unmarshal(e, &got) != nil || !strings.Contains(got.Message, "not recorded") {
		t.Fatalf("an error over %d bytes: %.200s, want one saying it was not recorded", maxErrorKept, e)
	}
}

// FuzzResultDigest: any answer, in any pieces, reduces to what the whole gives.
func FuzzResultDigest(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":true}}`), uint16(3))
	f.Add([]byte(`{"result":{"resultType":"input_required"},"id":1,"result":5}`), uint16(1))
	f.Add([]byte(`{"id":1,"error":{"code":1},"error":{"code":2,"message":"x"}}`), uint16(2))
	f.Add([]byte(`{"id":1,"result":{"is\u0045rror":true}}`), uint16(4))
	f.Add([]byte(`{"id":1,"result":[`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`]}`), uint16(100))
	var queued atomic.Int64
	f.Fuzz(func(t *testing.T, msg []byte, chunk uint16) {
		d := digestOf(msg, int(chunk%4096)+1, &queued)
		if !json.Valid(msg) {
			d.Kind() // must not hang or panic
			d.Report(4096)
			return
		}
		sameAsWhole(t, msg, d, 4096)
	})
}
