// Package framing turns a byte stream into whole newline-delimited JSON messages and
// back (the MCP stdio transport). It knows nothing about what the messages mean, with
// one exception: of a line too long to keep, it finds the JSON-RPC id on the way past,
// so that whoever sent it can still be answered.
package framing

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// DefaultMaxMessage is the default cap on one line. MCP has no limit of its own and tools
// return tens of MB (file contents, screenshots); the cap only exists so a peer that
// never sends a newline cannot make the proxy allocate without bound.
const DefaultMaxMessage = 256 << 20

// readSize is the size of the reusable read buffer. Almost every MCP message fits, so
// the common case is one read syscall and one copy into an exactly-sized message.
const readSize = 64 << 10

// ErrStreamed is what Read returns when a line went to a LineSink (SetStream) instead
// of being returned: the caller may act between lines, then reads on.
var ErrStreamed = errors.New("framing: the line was streamed")

// TooLongError reports a line longer than the reader's cap. The line has been consumed
// and dropped; the next Read continues with the line after it.
type TooLongError struct {
	Size int64 // bytes in the dropped line, without its terminator
	Max  int
	// ID and Method are the line's top-level JSON-RPC "id" and "method" values, raw,
	// when it was an object that had them: found as the line streamed past, so its
	// sender can be answered although the line itself is gone. An id too long to keep
	// (jsonlex.Peek.IDOrNull) is null: answered so, as JSON-RPC says, not taken for a
	// notification nobody waits for.
	ID, Method []byte
	// Early says the error is reported as the line passed the cap, not at its end:
	// what came before the cap already named the line's id, and a method or the
	// start of its result, so its sender is answered now rather than when (if ever)
	// the line ends. Size is then what was read by that moment; the rest of the line
	// is dropped as it comes, and the next Read returns the line after it.
	Early bool
}

// Sized is the line's size for a person: "N bytes", or "more than N bytes" when it
// was told before it ended.
func (e *TooLongError) Sized() string {
	if e.Early {
		return fmt.Sprintf("more than %d bytes", e.Size)
	}
	return fmt.Sprintf("%d bytes", e.Size)
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("framing: dropped a %d-byte line, over the %d-byte cap", e.Size, e.Max)
}

// Reader reads newline-delimited messages. It is not safe for concurrent use: a stream
// has one reader.
type Reader struct {
	r   io.Reader
	max int

	buf        []byte // reusable read buffer; buf[start:end] is unconsumed input
	start, end int
	err        error // sticky error from r, reported once buffered lines are drained

	// frags holds the pieces of a line longer than buf, in order. Pieces are handed
	// over, never copied, until the line is complete and assembled exactly once.
	frags     [][]byte
	fragBytes int64
	fragLast  byte // last byte stashed, kept even while skipping (it may be a "\r")
	skipping  bool // dropping the rest of an over-cap line
	// peek reads an over-cap line's id and method as it streams past (nil while the
	// line is within the cap).
	peek *jsonlex.Peek

	unterminated bool // the line Read last returned was ended by the stream, not a newline

	// nlAt is where Buffered found the newline of the line at buf[start:], as an
	// offset from start, while nlFor == start+1 (0: nothing found): Read, which
	// follows Buffered for every message under load, does not look for it again.
	nlFor, nlAt int

	// early is the TooLongError of the line being dropped, to be returned before the
	// line ends (TooLongError.Early); told says it was, so its end is not said again.
	early *TooLongError
	told  bool

	// slab, with WithSlab, is the block small messages are carved from; slabOn says
	// the option is set.
	slab   []byte
	slabOn bool
	// lend, with WithLending, says a line that lies whole in the read buffer is
	// returned in place, not copied.
	lend bool

	// Streaming (SetStream): a line that reaches streamAt bytes, and whose head says
	// how it is routed, goes to the LineSink startStream gives, piece by piece.
	streamAt    int
	startStream func(*jsonlex.Peek) LineSink
	spk         jsonlex.Peek // the line's scan, from its first byte
	spkFed      int64        // bytes of the current line fed to spk
	spkOn       bool         // spk is following the current line
	undecided   bool         // the current line was offered and not taken: assemble it
	sink        LineSink     // the line being streamed, nil when none
	sinkBytes   int64        // bytes of it read so far, a held "\r" included
	sinkCR      bool         // the last byte read was a "\r", not yet given to sink
	cr          [1]byte      // a "\r" to give it, later
	// streamBuf is the read buffer while a line streams, kept for the next;
	// smallBuf the usual one it stood in for.
	streamBuf, smallBuf []byte
	// offered is the line being offered (SetStream's start), when all of it, to
	// its newline, is in the buffer already (Offered).
	offered []byte
}

// Offered is, while SetStream's start is deciding, the line offered when all of
// it (not its terminator) is read already; nil when only its head is. It is the
// Reader's, valid only until start returns: a start that would judge a whole line
// as Read's caller judges one it returns (and refuse to stream one it would drop)
// need not wait for its pieces.
func (r *Reader) Offered() []byte { return r.offered }

// LineSink takes a line that is streamed rather than returned whole (SetStream).
type LineSink interface {
	// Write takes the next piece of the line, in order, never its terminator. The
	// piece is the Reader's: it must not be kept after Write returns. A sink that
	// can no longer forward keeps taking pieces and drops them.
	Write(p []byte)
	// End says the line is over, with what the whole of it was.
	End(LineEnd)
}

// LineEnd is how a streamed line ended.
type LineEnd struct {
	Size int64 // bytes in the line, without its terminator
	// Cut says the stream ended before the line's newline (a writer that died
	// mid-line, or one that exits without a final newline).
	Cut bool
	// Over says the line passed the cap: Size is what was streamed by then, and the
	// rest of the line is dropped as it comes, unseen.
	Over bool
	Max  int
	// Peek is the scan of all of the line that was streamed: its top-level id,
	// method, whether it is an answer, whether it held more than one value. It is
	// the Reader's, valid until the next Read.
	Peek *jsonlex.Peek
}

// Option configures a Reader.
type Option func(*Reader)

// WithMaxMessage sets the cap on one line's length in bytes (<= 0 means the default).
func WithMaxMessage(n int) Option {
	return func(r *Reader) {
		if n > 0 {
			r.max = n
		}
	}
}

// Slab sizes (WithSlab): a block holds a few hundred small messages, and a message
// larger than slabMsgMax is allocated on its own as without the option.
const (
	slabSize   = 16 << 10
	slabMsgMax = 2 << 10
)

// WithSlab makes Read carve small messages out of shared blocks instead of allocating
// each: one allocation per few hundred messages rather than one per message (at
// 150,000 messages a second, the allocation and the sweeping after it were a tenth
// of a relay's CPU). A message is still the caller's alone, its bytes never reused,
// but while any message of a block is held the whole block stays in memory: it is for
// a caller that holds no message long (a pure pipe), not one that queues them.
func WithSlab() Option {
	return func(r *Reader) { r.slabOn = true }
}

// WithLending makes Read return a line that lies whole in its read buffer (almost
// every message) in place, as a slice of that buffer, instead of a copy: no
// allocation and no copy per message. Such a message is lent, not given: it stays
// valid only until the Reader next reads its source, which is at the latest the next
// Read — but a Read right after Buffered reported true returns a line already
// buffered and reads nothing, so the messages returned before it stay valid too (a
// relay holds a message while it reads the next this way). Whoever keeps a message
// longer copies it. A lent message's capacity is its length: an append to it cannot
// reach the next line, and an edit in place (a key cut out of it) changes nothing
// else. A line longer than the buffer is assembled and given, as without the option.
func WithLending() Option {
	return func(r *Reader) { r.lend = true }
}

// SetStream makes lines of at least threshold bytes stream: once as much of such a
// line has been read as says how it is routed (jsonlex.Peek.Decided: its id and a
// method or the start of a result or error, or a notification's method), start is
// asked for a sink, and when it gives one, the line goes to it as it arrives —
// what is held first, then each read — and Read returns ErrStreamed when it ended
// (with the stream's error instead when the stream ended inside it). A line start declines (nil), or whose head never decides, is read
// whole as before. A complete line in the buffer of threshold bytes or more is
// offered too, so threshold 1 streams every line that decides. Call it before the
// first Read or from the goroutine that reads; threshold <= 0 turns streaming off.
func (r *Reader) SetStream(threshold int, start func(*jsonlex.Peek) LineSink) {
	if threshold <= 0 || start == nil {
		r.streamAt, r.startStream = 0, nil
		return
	}
	r.streamAt, r.startStream = threshold, start
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader, opts ...Option) *Reader {
	fr := &Reader{r: r, max: DefaultMaxMessage, buf: make([]byte, readSize), cr: [1]byte{'\r'}}
	for _, o := range opts {
		o(fr)
	}
	return fr
}

// Read returns the next message: a line without its "\n" or "\r\n", never blank. The
// caller owns the returned slice (the Reader never touches it again), so it can be
// forwarded and then handed to bookkeeping on another goroutine without a copy —
// except with WithLending, where the Reader lends it until it next reads its source.
//
// A line over the cap yields a *TooLongError and is skipped; the stream goes on. At the
// end of the stream a last line without a newline is still returned, then io.EOF.
func (r *Reader) Read() ([]byte, error) {
	r.unterminated = false
	for {
		if r.sink != nil {
			done, err := r.pump()
			if err != nil {
				return nil, err
			}
			if done {
				return nil, ErrStreamed
			}
			continue
		}
		i := r.newline()
		if r.streamAt > 0 && !r.skipping && !r.undecided && r.offer(i) {
			continue
		}
		if i >= 0 {
			line := r.buf[r.start : r.start+i]
			r.start += i + 1
			if msg, err, ok := r.finish(line); ok {
				return msg, err
			}
			continue
		}
		if r.err != nil {
			// The stream ended inside a line: a writer that exits without a final
			// newline still meant that line as a message.
			line := r.buf[r.start:r.end]
			r.start = r.end
			if len(line) > 0 || len(r.frags) > 0 || r.skipping {
				if msg, err, ok := r.finish(line); ok {
					r.unterminated = err == nil
					return msg, err
				}
			}
			return nil, r.err
		}
		r.fill()
		if e := r.early; e != nil {
			r.early, r.told = nil, true
			return nil, e
		}
	}
}

// Unterminated reports whether the message Read last returned was cut off by the end
// of the stream rather than ended by a newline. A writer that exits cleanly may leave
// its last line so; one that crashes mid-line leaves a fragment. Which of the two it
// is, is for the caller to judge (a server's fragment must never reach the host).
func (r *Reader) Unterminated() bool { return r.unterminated }

// Buffered reports whether the next Read will return a message without waiting for
// input: a complete, non-blank line is already in the buffer. Blank lines at the head
// are consumed on the way. A relay uses it to decide whether to hold a message back
// for the next one (see Writer.Hold).
func (r *Reader) Buffered() bool {
	if len(r.frags) > 0 || r.skipping || r.sink != nil {
		return false
	}
	for {
		i := r.newline()
		if i < 0 {
			return false
		}
		r.nlFor, r.nlAt = r.start+1, i
		line := r.buf[r.start : r.start+i]
		if r.streamAt > 0 && i >= r.streamAt {
			// Read may stream it, and a streamed line is written by the Reader's
			// caller's sink before Read returns the message after it: a caller
			// that asked in order to hold the message it has would see them
			// swapped.
			return false
		}
		if !isBlank(line) && i <= r.max {
			return true
		}
		if !isBlank(line) || i > r.max {
			// Over the cap: Read reports it, a blank line too (one Buffered
			// consumed was reported or not by whether the relay had asked).
			return false
		}
		r.start += i + 1
	}
}

// newline is the offset from start of the first newline in buf[start:end], -1 when
// there is none yet.
func (r *Reader) newline() int {
	if r.nlFor == r.start+1 {
		return r.nlAt
	}
	return bytes.IndexByte(r.buf[r.start:r.end], '\n')
}

// fill reads more input, first making room: unconsumed bytes move to the front, and a
// buffer that is full without a newline becomes a fragment of a long line.
func (r *Reader) fill() {
	r.nlFor = 0
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		r.stash(r.buf)
		// Grow the next buffer with the line so a 64 MB message is a few dozen
		// fragments (and reads), not a thousand; cap it because the buffer being
		// filled is memory on top of the line itself.
		size := min(len(r.buf)*2, 1<<20)
		r.buf = make([]byte, size)
		r.start, r.end = 0, 0
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.EOF
		}
		r.err = err
	}
}

// stash keeps p as the next piece of a long line, or drops it when the line is already
// over the cap (so a stream without newlines costs bounded memory).
func (r *Reader) stash(p []byte) {
	r.fragBytes += int64(len(p))
	r.fragLast = p[len(p)-1]
	if r.skipping {
		r.peek.Write(p)
		return
	}
	// One byte of slack: the line's trailing "\r" may be in this piece and isn't counted.
	if r.fragBytes > int64(r.max)+1 {
		r.startPeek()
		r.peek.Write(p)
		r.frags = nil
		r.skipping = true
		// A line that never ends (a server stuck writing, a hostile peer) would
		// otherwise leave its request unanswered for ever. Answerable now when its
		// id is known and it is surely an answer or a request: an id with neither
		// could be either, and answering the wrong side is worse than waiting.
		if pk := r.peek; pk.IDOrNull() != nil && (pk.Method != nil || pk.Answer) {
			r.early = &TooLongError{Size: r.fragBytes, Max: r.max, ID: pk.IDOrNull(), Method: pk.Method, Early: true}
		}
		return
	}
	r.frags = append(r.frags, p)
}

// finish completes a line whose last piece is tail. ok is false for a blank line, which
// is not a message.
func (r *Reader) finish(tail []byte) (msg []byte, err error, ok bool) {
	r.endLine()
	total := r.fragBytes + int64(len(tail))
	if total > 0 && r.lastByte(tail) == '\r' {
		total--
	}
	if r.told {
		// Said as it passed the cap (TooLongError.Early): its end is only dropped.
		r.resetLong()
		return nil, nil, false
	}
	if r.skipping || total > int64(r.max) {
		if !r.skipping {
			r.startPeek()
		}
		r.peek.Write(tail)
		e := &TooLongError{Size: total, Max: r.max, ID: r.peek.IDOrNull(), Method: r.peek.Method}
		r.resetLong()
		return nil, e, true
	}
	if len(r.frags) == 0 {
		tail = tail[:total]
		if isBlank(tail) {
			return nil, nil, false
		}
		if r.lend {
			return tail[:total:total], nil, true
		}
		msg = r.alloc(int(total))
		copy(msg, tail)
		return msg, nil, true
	}
	msg = make([]byte, total)
	n := 0
	for _, f := range r.frags {
		n += copy(msg[n:], f)
	}
	copy(msg[n:], tail)
	r.resetLong()
	if isBlank(msg) {
		return nil, nil, false
	}
	return msg, nil, true
}

// alloc returns n bytes for a message: from the slab (WithSlab), or its own.
func (r *Reader) alloc(n int) []byte {
	if !r.slabOn || n > slabMsgMax {
		return make([]byte, n)
	}
	if len(r.slab) < n {
		r.slab = make([]byte, slabSize)
	}
	// Capped at its length: a caller's append must not run into the next message.
	msg := r.slab[:n:n]
	r.slab = r.slab[n:]
	return msg
}

// lastByte is the last byte of the line being finished; when the line ended exactly at
// a buffer boundary it is in the last fragment.
func (r *Reader) lastByte(tail []byte) byte {
	if len(tail) > 0 {
		return tail[len(tail)-1]
	}
	return r.fragLast
}

// startPeek starts reading the line that just went over the cap for its id, from
// the pieces already held.
func (r *Reader) startPeek() {
	r.peek = &jsonlex.Peek{}
	for _, f := range r.frags {
		r.peek.Write(f)
	}
}

func (r *Reader) resetLong() {
	r.endLine()
	r.told, r.early = false, nil
	r.peek = nil
	r.frags = nil
	r.fragBytes = 0
	r.skipping = false
	if len(r.buf) > readSize {
		// The grown buffer was sized for the long line; after it, go back to a small
		// one so an idle proxy doesn't hold megabytes.
		r.nlFor = 0
		rest := r.buf[r.start:r.end]
		r.buf = make([]byte, max(readSize, len(rest)))
		r.end = copy(r.buf, rest)
		r.start = 0
	}
}

// isBlank reports whether a line holds only JSON whitespace: such a line carries no
// message, and forwarding it would only make a peer report a parse error.
func isBlank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r':
		default:
			return false
		}
	}
	return true
}

// endLine forgets what streaming knew of the line that ended.
func (r *Reader) endLine() {
	r.spkOn, r.spkFed, r.undecided = false, 0, false
}

// offer looks at the line being read once it has streamAt bytes: when its head
// decides how it is routed and the caller takes it, the line starts streaming and
// offer reports true. The bytes already read are fed to the scan once each. nl is
// the index of the newline in the buffered bytes, -1 when none is there yet.
func (r *Reader) offer(nl int) bool {
	avail := r.buf[r.start:r.end]
	whole := nl >= 0
	if whole {
		avail = avail[:nl]
	}
	if r.fragBytes+int64(len(avail)) < int64(r.streamAt) {
		return false
	}
	if size := r.fragBytes + int64(len(avail)); size > int64(r.max) && !(whole && size == int64(r.max)+1 && avail[len(avail)-1] == '\r') {
		// Known to be over the cap already: dropped whole, as any such line is,
		// rather than streamed and cut (a cut line reaches its reader).
		r.undecided = true
		return false
	}
	if !r.spkOn {
		r.spk.Reset()
		r.spkOn, r.spkFed = true, 0
	}
	if r.spkFed < r.fragBytes {
		off := int64(0)
		for _, f := range r.frags {
			if end := off + int64(len(f)); end > r.spkFed {
				r.spk.Write(f[r.spkFed-off:])
				r.spkFed = end
			}
			off += int64(len(f))
		}
	}
	if k := r.spkFed - r.fragBytes; k < int64(len(avail)) {
		r.spk.Write(avail[k:])
		r.spkFed = r.fragBytes + int64(len(avail))
	}
	if !r.spk.Decided() {
		if whole || r.spk.Broken() {
			r.undecided = true // read whole, as any line is
		}
		return false
	}
	if whole && len(r.frags) == 0 && len(avail) > 0 {
		// (A line held in fragments is not one slice: it is streamed, as before.)
		r.offered = avail
		if n := len(avail); avail[n-1] == '\r' {
			r.offered = avail[:n-1] // a "\r\n" terminator's
		}
	}
	sink := r.startStream(&r.spk)
	r.offered = nil
	if sink == nil {
		r.undecided = true
		return false
	}
	r.sink, r.sinkBytes, r.sinkCR = sink, 0, false
	for _, f := range r.frags {
		r.give(f)
	}
	r.frags, r.fragBytes = nil, 0
	return true
}

// give passes p, the next bytes of the streamed line, to its sink, keeping back a
// final "\r": it may be the first half of a "\r\n" terminator, which is not the
// line's.
func (r *Reader) give(p []byte) {
	if len(p) == 0 {
		return
	}
	r.sinkBytes += int64(len(p))
	if r.sinkCR {
		r.sink.Write(r.cr[:])
		r.sinkCR = false
	}
	if p[len(p)-1] == '\r' {
		p, r.sinkCR = p[:len(p)-1], true
	}
	if len(p) > 0 {
		r.sink.Write(p)
	}
}

// pump moves the streamed line on: what is buffered of it goes to the sink, to its
// newline when that is here (the line then ends), or all of it, then more is read.
// done says the line ended; a non-nil error is the stream's end, after the line was
// ended as cut.
func (r *Reader) pump() (done bool, _ error) {
	avail := r.buf[r.start:r.end]
	i := bytes.IndexByte(avail, '\n')
	piece := avail
	if i >= 0 {
		piece = avail[:i]
	}
	// One byte over with a "\r" last is within the cap when the "\r" is the
	// terminator's: with the newline here, or still to come (the read ended between
	// them: give holds the "\r" back, and the next byte decides).
	if over := r.sinkBytes + int64(len(piece)) - int64(r.max); over > 0 && !(over == 1 && r.lastIsCR(piece)) {
		// Past the cap: a streamed line costs no memory, but the cap is the
		// contract for a line's size both ways, and an endless line must end.
		keep := max(int64(len(piece))-over, 0)
		r.feedGive(piece[:keep])
		r.start += int(keep)
		r.endSink(LineEnd{Size: r.sinkBytes, Over: true, Max: r.max})
		// The rest of it is dropped as it comes, the way a line told early is.
		r.skipping, r.told, r.fragBytes = true, true, 0
		r.peek = &jsonlex.Peek{}
		if r.spk.IDOrNull() == nil {
			// Its id is still to come (the TypeScript SDK writes it last): the scan
			// goes on over the rest, and the line's end is reported as a line over
			// the cap, with the id, so its sender is answered. (Scanned afresh from
			// the cap on, it was never found: a long call was never answered.)
			r.peek, r.told, r.fragBytes = &r.spk, false, r.sinkBytes
		}
		return true, nil
	}
	r.feedGive(piece)
	if i >= 0 {
		r.start += i + 1
		r.endSink(LineEnd{Size: r.sinkBytes, Max: r.max})
		r.unstream()
		return true, nil
	}
	r.start = r.end
	if r.err != nil {
		r.endSink(LineEnd{Size: r.sinkBytes, Cut: true, Max: r.max})
		return true, r.err
	}
	if len(r.buf) < streamReadSize {
		// Nothing is held of a streamed line: reads as large as the server's pipe
		// gives are fewer syscalls and wake-ups. One buffer for it, kept for the
		// next: a new one per line was garbage enough to raise the peak memory of
		// a 1 MB answer to 3.7 times its size.
		if r.streamBuf == nil {
			r.streamBuf = make([]byte, streamReadSize)
		}
		if len(r.buf) == readSize {
			r.smallBuf = r.buf
		}
		r.buf, r.start, r.end = r.streamBuf, 0, 0
	}
	r.fill()
	return false, nil
}

// streamReadSize is the read buffer while a line streams.
const streamReadSize = 256 << 10

// lastIsCR says the line ends in the "\r" of a "\r\n": the byte over the cap is
// the terminator's.
func (r *Reader) lastIsCR(piece []byte) bool {
	if len(piece) > 0 {
		return piece[len(piece)-1] == '\r'
	}
	return r.sinkCR
}

// feedGive scans p and gives it to the sink. What offer scanned already (the bytes
// that were in the buffer when the line started streaming) is not scanned twice.
func (r *Reader) feedGive(p []byte) {
	if seen := r.spkFed - r.sinkBytes; seen < int64(len(p)) {
		r.spk.Write(p[max(seen, 0):])
		r.spkFed = r.sinkBytes + int64(len(p))
	}
	r.give(p)
}

func (r *Reader) endSink(e LineEnd) {
	if r.sinkCR {
		// A final "\r" is the terminator's, as Read drops it from a line it
		// returns (also from one the stream's end cut off).
		e.Size--
		r.sinkCR = false
	}
	e.Peek = &r.spk
	sink := r.sink
	r.sink = nil
	r.endLine()
	sink.End(e)
}

// unstream goes back to the small read buffer after a streamed line, keeping what
// was read after it.
func (r *Reader) unstream() {
	if len(r.buf) <= readSize {
		return
	}
	rest := r.buf[r.start:r.end]
	if len(r.streamBuf) > 0 && &r.buf[0] == &r.streamBuf[0] && r.smallBuf != nil && len(rest) <= len(r.smallBuf) {
		r.end = copy(r.smallBuf, rest)
		r.start, r.buf, r.nlFor = 0, r.smallBuf, 0
		return
	}
	r.shrink()
}

// shrink goes back to a small read buffer after a long line grew it.
func (r *Reader) shrink() {
	if len(r.buf) > readSize {
		r.nlFor = 0
		rest := r.buf[r.start:r.end]
		r.buf = make([]byte, max(readSize, len(rest)))
		r.end = copy(r.buf, rest)
		r.start = 0
	}
}
