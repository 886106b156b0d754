package relay

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/redact"
)

// StreamedArgs is what the arguments of a long call streamed to the server
// (hoststream.go) were reduced to as they passed: interception takes its report's
// fingerprint and arguments from it, the arguments themselves never being held on
// the host's path. Its methods wait for the last piece to be read, and are for
// bookkeeping's goroutine.
type StreamedArgs interface {
	// Fingerprint is the fingerprint of the arguments (SPEC §3.2), "" when they
	// could not be fingerprinted (not JSON, or not read: see Report).
	Fingerprint() string
	// Report is the arguments redacted and clipped to budget, as redact.Report
	// gives them.
	Report(budget int) (json.RawMessage, bool)
	// Holds is about the most it keeps (StreamedArgsHolds, or the bytes it was
	// given when fewer): for the goroutine that streamed the call, once it passed.
	Holds() int64
}

// StreamingInterceptor is a KeyedInterceptor that can be given a long call without
// its arguments (FromHostStreamed): the relay then keeps none of the call.
type StreamingInterceptor interface {
	// StreamsArgs says interception can take a call so (it cannot when it records
	// the arguments themselves: a cassette).
	StreamsArgs() bool
	// FromHostStreamed is FromHost of a long call that went to the server in
	// pieces: standIn is the call with its arguments reduced to the correlation
	// member the host put there (if any), args what its arguments were reduced to.
	// Forwarded follows, as after FromHost.
	FromHostStreamed(standIn []byte, args StreamedArgs, readAt time.Time)
}

// argsDigest reduces a streamed call's arguments to a StreamedArgs on a goroutine of
// its own (digest): the host's path only copies each piece into a bounded queue, and
// when the queue is full (bookkeeping cannot keep up) it drops the rest rather than
// wait, and the report says the arguments were not recorded.
type argsDigest struct {
	digest
	queued atomic.Int64 // bytes in queue

	// The worker's, readable once done is closed: the arguments as forwarded (the
	// last value) reduced as they come, to their fingerprint and to what their
	// report can show (redact.Reducer: bounded, whatever their size).
	n   int64 // their size
	any bool  // some bytes of them came
	fs  jcs.Stream
	red redact.Reducer
	fp  string
}

// maxDigestQueued bounds what may wait in an argsDigest's queue.
const maxDigestQueued = 8 << 20

// StreamedArgsHolds is about the most a StreamedArgs keeps once its call has passed:
// what waits in its queue and what it reduced the arguments to.
const StreamedArgsHolds = maxDigestQueued + redact.ReducerHolds

func newArgsDigest() *argsDigest {
	d := &argsDigest{}
	d.start(d, &d.queued, maxDigestQueued)
	return d
}

func (d *argsDigest) begin() {
	d.n, d.any = 0, false
	d.fs.Reset()
	d.red.Reset()
}

func (d *argsDigest) write(p []byte) {
	d.fs.Write(p)
	d.red.Write(p)
	d.n += int64(len(p))
	d.any = true
}

func (d *argsDigest) end() {
	if !d.missed {
		// Computed as the pieces came (a Stream with nothing written is {}'s, as
		// absent arguments are); "" when it needs the arguments whole
		// (jcs.ErrNeedsWhole) or they are not JSON.
		if fp, err := d.fs.Sum(); err == nil {
			d.fp = fp
		}
	}
	d.fs = jcs.Stream{} // its buffers go: only the report's stand-in is wanted now
}

func (d *argsDigest) Holds() int64 { return min(d.fed, StreamedArgsHolds) }

func (d *argsDigest) Fingerprint() string {
	<-d.done
	return d.fp
}

func (d *argsDigest) Report(budget int) (json.RawMessage, bool) {
	<-d.done
	if d.missed {
		return json.RawMessage(strconv.Quote("[bir-proxy: not recorded: " + strconv.FormatInt(d.n, 10) + "+ bytes of arguments came faster than the proxy's bookkeeping could read them]")), true
	}
	if !d.any {
		return redact.Report([]byte(`{}`), budget) // absent: the host saw {}
	}
	return d.red.Report(budget)
}
