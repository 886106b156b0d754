package relay

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// TestAnswerStandInOfAnErrorIsAnError: interception sheds a long answer's reduction
// when bookkeeping falls behind, and then has only the stand-in: one of an error
// answer must read as an error answer (a result's reported the failed call as ok).
func TestAnswerStandInOfAnErrorIsAnError(t *testing.T) {
	for _, isErr := range []bool{false, true} {
		f, ok := jsonlex.TopFields(answerStandIn([]byte(`"a\"b"`), isErr))
		if !ok || string(f.ID) != `"a\"b"` || (f.Error != nil) != isErr || (f.Result != nil) == isErr || !jsonlex.Valid(answerStandIn([]byte("7"), isErr)) {
			t.Fatalf("isErr %v: %+v", isErr, f)
		}
	}
}

// TestAMissedErrorAnswerSaysNotRecorded: a long error answer whose digest fell behind
// before its "error" member (the pump's head saw it, the digest did not) is recorded
// with the stand-in's error, as interception reads it (the digest's error, when it
// has one, stands for the stand-in's). That was `{}`: a failed call reported with an
// empty error as though the server had sent it, where every other answer bookkeeping
// could not read says it was not recorded.
func TestAMissedErrorAnswerSaysNotRecorded(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"pad":"` + strings.Repeat("p", 2*digestChunk) + `","error":{"code":-32000,"message":"boom"}}`)
	var queued atomic.Int64
	queued.Store(maxResultsQueued - digestChunk/2) // others waiting: nothing of it fits
	d := digestOf(msg, digestChunk, &queued)
	var pk jsonlex.Peek
	pk.Write(msg)
	f, ok := jsonlex.TopFields(answerStandIn([]byte("1"), pk.Error))
	if !ok || f.Error == nil {
		t.Fatalf("the stand-in of an error answer: %+v", f)
	}
	if e := d.Error(); e != nil {
		f.Error = e
	}
	if !d.missed || !strings.Contains(jsonlex.StringOf(jsonlex.Get(f.Error, "message")), "not recorded") {
		t.Fatalf("missed %v: a missed error answer is recorded with the error %s", d.missed, f.Error)
	}
}
