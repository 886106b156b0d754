package relay

import (
	"encoding/json"
	"strconv"
	"sync"
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
// its own: the host's path only copies each piece into a bounded queue, and when
// the queue is full (bookkeeping cannot keep up) it drops the rest rather than wait,
// and the report says the arguments were not recorded.
type argsDigest struct {
	queue  chan digestPiece
	queued atomic.Int64 // bytes in queue
	behind bool         // the host's path dropped a piece: the rest is not read
	// What the host's path gathered of the pieces, queued as one when it reaches
	// digestChunk (ArgStrip emits a key, a separator, a value each on its own: one
	// queue entry apiece filled the queue's slots with a few hundred members' bytes).
	gather    []byte
	gatherNew bool // the gathered bytes begin a new value
	done      chan struct{}
	once      sync.Once

	// The worker's, readable once done is closed: the arguments as forwarded (the
	// last value) reduced as they come, to their fingerprint and to what their
	// report can show (redact.Reducer: bounded, whatever their size).
	n      int64 // their size
	any    bool  // some bytes of them came
	missed bool  // a piece was dropped
	fs     jcs.Stream
	red    redact.Reducer
	fp     string
}

type digestPiece struct {
	b      []byte
	begin  bool // b starts a new value
	end    bool // the arguments are over
	missed bool // on the end: the host's path dropped a piece
}

// maxDigestQueued bounds what may wait in the queue.
const maxDigestQueued = 8 << 20

// digestChunk is the least the host's path queues at once (but the last piece): the
// queue's slots then hold more than maxDigestQueued.
const digestChunk = 64 << 10

func newArgsDigest() *argsDigest {
	d := &argsDigest{queue: make(chan digestPiece, 256), done: make(chan struct{})}
	go d.run()
	return d
}

// add queues the next piece of the arguments (ArgStrip.Capture); begin starts a new
// value. It never waits.
func (d *argsDigest) add(p []byte, begin bool) {
	if d.behind {
		return
	}
	if begin {
		// A later value replaces an earlier one: what is gathered of that is of no use.
		d.gather, d.gatherNew = d.gather[:0], true
	}
	if d.queued.Load()+int64(len(d.gather)+len(p)) > maxDigestQueued {
		d.behind = true
		return
	}
	if d.gather == nil && len(p) > 0 {
		d.gather = make([]byte, 0, digestChunk+len(p))
	}
	d.gather = append(d.gather, p...)
	if len(d.gather) >= digestChunk {
		d.push()
	}
}

// push queues what is gathered.
func (d *argsDigest) push() {
	if d.behind || (len(d.gather) == 0 && !d.gatherNew) {
		return
	}
	var b []byte
	if len(d.gather) > 0 {
		b = d.gather
	}
	d.queued.Add(int64(len(b)))
	select {
	case d.queue <- digestPiece{b: b, begin: d.gatherNew}:
		d.gather, d.gatherNew = nil, false // the worker's now
	default:
		d.queued.Add(-int64(len(b)))
		d.behind = true
	}
}

// finish says the arguments are over. It never waits: with the queue full, the
// end is handed over by a goroutine of its own.
func (d *argsDigest) finish() {
	d.once.Do(func() {
		d.push()
		d.gather = nil
		end := digestPiece{end: true, missed: d.behind}
		select {
		case d.queue <- end:
		default:
			go func() { d.queue <- end }()
		}
	})
}

func (d *argsDigest) run() {
	defer close(d.done)
	for p := range d.queue {
		d.queued.Add(-int64(len(p.b)))
		switch {
		case p.end:
			d.missed = p.missed
			if !d.missed {
				// Computed as the pieces came (a Stream with nothing written is {}'s,
				// as absent arguments are); "" when it needs the arguments whole
				// (jcs.ErrNeedsWhole) or they are not JSON.
				if fp, err := d.fs.Sum(); err == nil {
					d.fp = fp
				}
			}
			d.fs = jcs.Stream{} // its buffers go: only the report's stand-in is wanted now
			return
		case p.begin:
			d.n, d.any = 0, false
			d.fs.Reset()
			d.red.Reset()
		}
		if len(p.b) > 0 {
			d.fs.Write(p.b)
			d.red.Write(p.b)
			d.n += int64(len(p.b))
			d.any = true
		}
	}
}

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
