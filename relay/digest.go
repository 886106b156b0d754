package relay

import (
	"sync"
	"sync/atomic"
)

// digest hands the pieces of a message streamed past the relay to a goroutine of its
// own, which reduces them to what a report needs (argsDigest, resultDigest): the
// pump only copies each piece into a bounded queue. When the queue is full
// (bookkeeping cannot keep up) it drops the rest rather than wait, and the worker
// is told a piece was missed. The worker's fields are readable once done is closed.
type digest struct {
	w      digestWorker
	queue  chan digestPiece
	queued *atomic.Int64 // bytes waiting in queue (shared by several digests, or not)
	limit  int64         // what queued may reach
	behind bool          // the pump dropped a piece: the rest is not read
	// What the pump gathered of the pieces, queued as one when it reaches
	// digestChunk (ArgStrip emits a key, a separator, a value each on its own: one
	// queue entry apiece filled the queue's slots with a few hundred members' bytes).
	gather    []byte
	gatherNew bool // the gathered bytes begin a new value
	done      chan struct{}
	once      sync.Once
	missed    bool  // the worker's: a piece was dropped
	fed       int64 // the pump's: the bytes it took of the values (what they may keep)
	// given is the pump's: every byte it was given, those dropped too (readable by
	// the worker once the end is handed over: the size of what passed).
	given int64
}

// digestWorker is what a digest's goroutine feeds.
type digestWorker interface {
	begin()         // a new value starts: the last one written wins
	write(p []byte) // its next bytes
	end()           // it is over (digest.missed says whether all of it came)
}

type digestPiece struct {
	b      []byte
	begin  bool // b starts a new value
	end    bool // the value is over
	missed bool // on the end: the pump dropped a piece
}

// digestChunk is the least the pump queues at once (but the last piece): the queue's
// slots then hold more than its limit.
const digestChunk = 64 << 10

// start starts d's goroutine, feeding w; queued counts the bytes waiting, up to
// limit.
func (d *digest) start(w digestWorker, queued *atomic.Int64, limit int64) {
	d.w, d.queued, d.limit = w, queued, limit
	d.queue, d.done = make(chan digestPiece, 256), make(chan struct{})
	go d.run()
}

// add queues the next piece of the value; begin starts a new value. It never waits.
func (d *digest) add(p []byte, begin bool) {
	d.given += int64(len(p))
	if d.behind {
		return
	}
	if begin {
		// A later value replaces an earlier one: what is gathered of that is of no use.
		d.gather, d.gatherNew = d.gather[:0], true
	}
	if d.queued.Load()+int64(len(d.gather)+len(p)) > d.limit {
		d.behind = true
		return
	}
	if d.gather == nil && len(p) > 0 {
		d.gather = make([]byte, 0, digestChunk+len(p))
	}
	d.gather = append(d.gather, p...)
	d.fed += int64(len(p))
	if len(d.gather) >= digestChunk {
		d.push()
	}
}

// push queues what is gathered.
func (d *digest) push() {
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

// finish says the value is over. It never waits: with the queue full, the end is
// handed over by a goroutine of its own.
func (d *digest) finish() {
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

func (d *digest) run() {
	defer close(d.done)
	for p := range d.queue {
		d.queued.Add(-int64(len(p.b)))
		switch {
		case p.end:
			d.missed = p.missed
			d.w.end()
			return
		case p.begin:
			d.w.begin()
		}
		if len(p.b) > 0 {
			d.w.write(p.b)
		}
	}
}
