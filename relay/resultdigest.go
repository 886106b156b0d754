package relay

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
)

// StreamedResult is what a long answer of the server's, streamed to the host
// (stream.go), was reduced to as it passed: interception takes its report's result,
// error and outcome from it, the answer itself never being held. Its methods wait for
// the last piece to be read, and are for bookkeeping's goroutine.
type StreamedResult interface {
	// Kind says the result asks for input ("resultType": "input_required") or is a
	// tool's error ("isError": true), read as jsonlex.Get reads them.
	Kind() (inputRequired, isError bool)
	// Error is the answer's "error" value, nil when it has none.
	Error() json.RawMessage
	// Report is the result redacted and clipped to budget, as redact.Report gives
	// it; nil when the answer had no result.
	Report(budget int) (json.RawMessage, bool)
	// ResultBytes is the size of the answer's result as it passed (of its error,
	// when it has one: the call is then an rpc_error), counted as the bytes went by;
	// 0 when it had neither. When bookkeeping fell behind and the rest was not read,
	// it counts every byte of the message from where that stopped: an over-count by
	// the members after the value, a few bytes.
	ResultBytes() int64
	// Holds is about the most it keeps (StreamedResultHolds, or the bytes it was
	// given when fewer): for the goroutine that streamed the answer, once it passed.
	Holds() int64
}

// ResultStreamingInterceptor is an interceptor that can be given a long answer
// without its result (FromUpstreamStreamed): the relay then keeps none of it.
type ResultStreamingInterceptor interface {
	// AnswerWanted says whether interception wants the answer with this id at all,
	// and if so whether whole (a handshake answer it learns from, a cassette's).
	AnswerWanted(id []byte) (want, whole bool)
	// FromUpstreamStreamed is FromUpstream of a long answer that went to the host in
	// pieces: standIn is the answer with its result emptied, res what its result
	// and error were reduced to.
	FromUpstreamStreamed(standIn []byte, res StreamedResult, readAt time.Time)
}

// maxResultsQueued bounds the bytes of the server's answers waiting, together, to
// be reduced: a result is reduced at ~150 MB/s (redaction hashes what it cuts), slower
// than a pipe passes it, and up to this much of a fast one waits. Past it the rest is
// not read, and the report says the result was not recorded.
const maxResultsQueued = 64 << 20

// maxErrorKept bounds an error value kept as it is; a longer one is reported as
// one that was not recorded.
const maxErrorKept = 64 << 10

// StreamedResultHolds is about the most a StreamedResult keeps once its answer has
// passed (its reduced result and its error): what one waiting for bookkeeping costs.
const StreamedResultHolds = redact.ReducerHolds + maxErrorKept

// resultDigest reduces a long answer (the whole message: its top-level structure is
// read here, off the pump) to a StreamedResult.
type resultDigest struct {
	digest

	// The worker's, readable once done is closed.
	top     jsonlex.Peek   // the message; its Tap gives the result and error
	kind    jsonlex.Peek   // the result's isError and resultType
	code    jsonlex.Peek   // the error's code, for the stand-in of one too long to keep
	red     redact.Reducer // the result
	n       int64          // the message's bytes read
	res     bool           // a result came
	resN    int64          // its size
	errv    []byte         // the error, when one came and fits
	errN    int64          // its size
	anyErr  bool
	errOver bool
}

func newResultDigest(queued *atomic.Int64) *resultDigest {
	d := &resultDigest{}
	d.top.Tap = d.tap
	d.kind.Names = &[2]string{"isError", "resultType"}
	d.code.Names = &[2]string{"code", "code"}
	d.start(d, queued, maxResultsQueued)
	return d
}

func (d *resultDigest) begin() {}

func (d *resultDigest) write(p []byte) {
	d.n += int64(len(p))
	d.top.Write(p)
}

func (d *resultDigest) end() {}

// tap takes the result's and error's bytes from the message's Peek.
func (d *resultDigest) tap(b []byte, begin, isErr bool) {
	if isErr {
		if begin {
			d.anyErr, d.errv, d.errN, d.errOver = true, d.errv[:0], 0, false
			d.code.Reset()
		}
		d.errN += int64(len(b))
		d.code.Write(b)
		if d.errOver || len(d.errv)+len(b) > maxErrorKept {
			d.errv, d.errOver = nil, true
			return
		}
		d.errv = append(d.errv, b...)
		return
	}
	if begin {
		d.res, d.resN = true, 0
		d.red.Reset()
		d.kind.Reset()
	}
	d.resN += int64(len(b))
	d.red.Write(b)
	d.kind.Write(b)
}

func (d *resultDigest) Holds() int64 { return min(d.fed, StreamedResultHolds) }

func (d *resultDigest) ResultBytes() int64 {
	<-d.done
	var n int64
	switch {
	case d.anyErr:
		n = d.errN
	case d.res:
		n = d.resN
	}
	if d.missed {
		// The rest of the message went by unread: it is counted as the value's.
		n += d.given - d.n
	}
	return n
}

func (d *resultDigest) Kind() (inputRequired, isError bool) {
	<-d.done
	k := &d.kind
	if !d.res || d.missed || !k.Done() || k.Broken() {
		return false, false // as resultKind reads what is not one whole object
	}
	return jsonlex.StringOf(k.Method) == "input_required", string(k.ID) == "true"
}

func (d *resultDigest) Error() json.RawMessage {
	<-d.done
	switch {
	case !d.anyErr:
		return nil
	case d.missed:
		// What was read of it may be a fragment (a secret cut short is no longer one
		// the redaction rules know), and a later duplicate may have replaced it.
		return json.RawMessage(`{"message":` + strconv.Quote("bir-proxy: not recorded: "+strconv.FormatInt(d.n, 10)+"+ bytes of the answer came faster than the proxy's bookkeeping could read them") + `}`)
	case d.errOver:
		// Its code, when it is a number, is kept: tracing's error.type and rpc code,
		// and the report's error, show it as for the whole error.
		b := []byte(`{`)
		if c := d.code.ID; d.code.Done() && !d.code.Broken() && c != nil {
			if _, err := strconv.ParseInt(string(c), 10, 64); err == nil {
				b = append(append(append(b, `"code":`...), c...), ',')
			}
		}
		b = append(append(b, `"message":`...), strconv.Quote("bir-proxy: not recorded: the server's error was "+strconv.FormatInt(d.errN, 10)+"+ bytes")...)
		return append(b, '}')
	}
	return d.errv
}

func (d *resultDigest) Report(budget int) (json.RawMessage, bool) {
	<-d.done
	switch {
	case d.missed:
		return json.RawMessage(strconv.Quote("[bir-proxy: not recorded: " + strconv.FormatInt(d.n, 10) + "+ bytes of the answer came faster than the proxy's bookkeeping could read them]")), true
	case !d.res:
		return nil, false
	}
	return d.red.Report(budget)
}
