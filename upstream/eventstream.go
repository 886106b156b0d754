package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// An SSE (text/event-stream) reader, per the WHATWG "event stream interpretation":
// lines end in CRLF, LF or a lone CR; a line starting with ':' is a comment; "data"
// lines accumulate (joined by LF); "id" sets the last event id (unless it holds NUL);
// "retry" sets the reconnection time (ASCII digits only); a blank line dispatches the
// event; an event cut off by the end of the stream is discarded; a leading BOM is
// skipped.
//
// There is no line cap: an MCP answer can be one 50 MB data line. Data is gathered in
// blocks that grow to blockMax and is copied once into an exact-size slice when the
// event is dispatched, so a message costs at most twice its size while it is read
// (bufio.Scanner would need a buffer as large as the largest line, and append-growth
// would leave up to four times behind for the collector).

const (
	sseReadBuf  = 64 << 10 // bytes read from the body at a time
	blockFirst  = 4 << 10
	blockMax    = 4 << 20
	smallFields = 4 << 10 // cap on an event name, id or retry value; longer ones are cut
)

// sseEvent is one dispatched event.
type sseEvent struct {
	Name string // "" when the stream gave none (the SSE default, "message")
	Data []byte // the data lines joined by LF; nil for an event with no data line
	// TooLong says Data was over the reader's cap and was dropped.
	TooLong bool
	Size    int // the data's size, even when TooLong
	// Shared says TooLong is the budget shared by the answers being read at once
	// (sseReader.bodies), not the event's own cap.
	Shared bool
	// Held is what Data holds of that budget: given back once it is passed on.
	Held int64
}

// maxRetry caps the reconnection time an event stream may ask for (its "retry"
// field): longer, and a request waiting on the resume of its broken stream is left
// unanswered for as long as the server likes (docs/remote.md).
const maxRetry = 30 * time.Second

// sseReader reads events from an SSE body.
type sseReader struct {
	src    io.Reader
	buf    []byte
	r, w   int
	err    error
	skipLF bool // the last line ended in CR: a LF starting the next read belongs to it
	start  bool // nothing read yet (a BOM may come)

	max int // cap on one event's data (0: none)
	// bodies, when set, is charged for the data's blocks past their first freeBody
	// bytes (readBodyIn's rule): held is what the event being read has charged.
	bodies *budget
	held   int64
	shared bool // the event passed the shared budget

	// LastID is the last event id the stream set ("" until one is set, or after an
	// empty id field resets it); HasID says an id field was seen at all.
	LastID string
	HasID  bool
	// Retry is the reconnection time the stream asked for (0: none).
	Retry time.Duration

	// The event being built.
	name   []byte
	blocks [][]byte
	size   int
	data   bool // a data field was seen
	over   bool // size passed max
	told   bool // the event was said over max as it passed it: its end is not said again
	// midLine says the event was said over max in the middle of a data line: the
	// rest of that line is data (dropped), not fields.
	midLine bool
}

// errEventOverCap says the event being read has just passed the reader's cap.
var errEventOverCap = errors.New("an event over the size cap")

func newSSEReader(src io.Reader, max int) *sseReader {
	return newSSEReaderSize(src, max, sseReadBuf)
}

func newSSEReaderSize(src io.Reader, max, bufSize int) *sseReader {
	return &sseReader{src: src, buf: make([]byte, bufSize), start: true, max: max}
}

// fill reads more bytes into buf, keeping the unread ones. It returns false at the end
// of the stream (or an error, in sr.err).
func (sr *sseReader) fill() bool {
	if sr.err != nil {
		return false
	}
	if sr.r > 0 {
		n := copy(sr.buf, sr.buf[sr.r:sr.w])
		sr.r, sr.w = 0, n
	}
	for {
		n, err := sr.src.Read(sr.buf[sr.w:])
		sr.w += n
		if err != nil {
			sr.err = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// Next returns the next event. At the end of the stream it returns io.EOF (an event
// not ended by a blank line is discarded, as the standard says), or the read error.
func (sr *sseReader) Next() (sseEvent, error) {
	for {
		ok, err := sr.line()
		if errors.Is(err, errEventOverCap) {
			// Said at once, not when the event ends: a server that never ends it
			// would otherwise be read for ever before anyone heard of it, its
			// request unanswered. The rest of the event is dropped as it comes;
			// a caller waiting on this stream for one answer stops reading it.
			sr.told = true
			return sseEvent{Name: string(sr.name), TooLong: true, Size: sr.size, Shared: sr.shared}, nil
		}
		if err != nil {
			sr.reset()
			return sseEvent{}, err
		}
		if ok {
			if ev, dispatched := sr.dispatch(); dispatched {
				return ev, nil
			}
		}
	}
}

// line reads one line and applies it. It returns true when the line was blank (an
// event ends).
func (sr *sseReader) line() (blank bool, err error) {
	if sr.midLine {
		sr.midLine = false
		if err := sr.skipLine(); err != nil {
			return false, err
		}
	}
	// The first piece: enough to know the field.
	for {
		if sr.r == sr.w && !sr.fill() {
			return false, sr.endErr()
		}
		if sr.skipLF {
			sr.skipLF = false
			if sr.buf[sr.r] == '\n' {
				sr.r++
				continue
			}
		}
		if sr.start {
			if sr.w-sr.r < 3 && bytes.HasPrefix([]byte("\xEF\xBB\xBF"), sr.buf[sr.r:sr.w]) && sr.fill() {
				continue // maybe a BOM: wait for all three bytes
			}
			sr.start = false
			if bytes.HasPrefix(sr.buf[sr.r:sr.w], []byte("\xEF\xBB\xBF")) {
				sr.r += 3
				continue
			}
		}
		break
	}
	// Find the field name: up to ':' or the end of the line, within what is buffered
	// (more is read while the buffer has room, so a name is never cut by a read).
	var colon, eol int
	for {
		seg := sr.buf[sr.r:sr.w]
		eol = indexEOL(seg)
		lim := len(seg)
		if eol >= 0 {
			lim = eol
		}
		colon = bytes.IndexByte(seg[:lim], ':')
		if colon >= 0 || eol >= 0 {
			break
		}
		if sr.r > 0 || sr.w < len(sr.buf) {
			if !sr.fill() {
				// The stream ended inside a line: that line and its event are dropped.
				return false, sr.endErr()
			}
			continue
		}
		// A field name longer than the whole buffer: no field has such a name.
		return false, sr.skipLine()
	}
	seg := sr.buf[sr.r:sr.w]
	if eol == 0 {
		sr.consumeEOL(0)
		return true, nil
	}
	var name []byte
	if colon >= 0 {
		name = seg[:colon]
	} else {
		name = seg[:eol]
	}
	switch {
	case colon == 0:
		return false, sr.skipLine() // a comment
	case string(name) == "data":
		if sr.data {
			sr.appendData([]byte{'\n'})
		}
		sr.data = true
		return false, sr.valueTo(colon, eol, sr.appendData)
	case string(name) == "event":
		sr.name = sr.name[:0]
		return false, sr.valueTo(colon, eol, func(p []byte) { sr.name = appendCapped(sr.name, p) })
	case string(name) == "id":
		var v []byte
		err := sr.valueTo(colon, eol, func(p []byte) { v = appendCapped(v, p) })
		if bytes.IndexByte(v, 0) < 0 {
			sr.LastID, sr.HasID = string(v), true
		}
		return false, err
	case string(name) == "retry":
		var v []byte
		err := sr.valueTo(colon, eol, func(p []byte) { v = appendCapped(v, p) })
		if ms, ok := digits(v); ok {
			// Capped: "retry: 999999999999" (31 years) was honoured as is, and the
			// request whose stream broke waited for a resume that would never come.
			sr.Retry = min(time.Duration(ms)*time.Millisecond, maxRetry)
		}
		return false, err
	default:
		return false, sr.skipLine()
	}
}

// valueTo passes the value of the current line (after the colon at colon and one
// optional space; eol is the end of the line in the buffer, or -1 when the line goes
// on past it) to sink in pieces, and consumes the line.
func (sr *sseReader) valueTo(colon, eol int, sink func([]byte)) error {
	if colon < 0 {
		sr.consumeEOL(eol) // a field with no colon has an empty value
		return nil
	}
	sr.r += colon + 1
	if sr.r == sr.w && !sr.fill() {
		return sr.endErr()
	}
	if sr.buf[sr.r] == ' ' {
		sr.r++
	}
	for {
		seg := sr.buf[sr.r:sr.w]
		if e := indexEOL(seg); e >= 0 {
			sink(seg[:e])
			sr.consumeEOL(e)
			if sr.over && !sr.told {
				return errEventOverCap
			}
			return nil
		}
		sink(seg)
		sr.r = sr.w
		if sr.over && !sr.told {
			sr.midLine = true
			return errEventOverCap
		}
		if !sr.fill() {
			return sr.endErr()
		}
	}
}

// skipLine consumes the rest of the current line.
func (sr *sseReader) skipLine() error {
	for {
		if e := indexEOL(sr.buf[sr.r:sr.w]); e >= 0 {
			sr.consumeEOL(e)
			return nil
		}
		sr.r = sr.w
		if !sr.fill() {
			return sr.endErr()
		}
	}
}

// consumeEOL consumes the line terminator at sr.buf[sr.r+e].
func (sr *sseReader) consumeEOL(e int) {
	sr.r += e
	if sr.buf[sr.r] == '\r' {
		sr.skipLF = true
	}
	sr.r++
}

func (sr *sseReader) endErr() error {
	if sr.err == nil || errors.Is(sr.err, io.EOF) {
		return io.EOF
	}
	return sr.err
}

func (sr *sseReader) appendData(p []byte) {
	sr.size += len(p)
	if sr.over || (sr.max > 0 && sr.size > sr.max) {
		if !sr.over {
			sr.over = true
			sr.blocks = nil
			sr.release()
		}
		return
	}
	for len(p) > 0 {
		n := len(sr.blocks)
		if n == 0 || len(sr.blocks[n-1]) == cap(sr.blocks[n-1]) {
			size := blockFirst
			if n > 0 {
				size = min(2*cap(sr.blocks[n-1]), blockMax)
			}
			if n == 0 && len(p) > size {
				size = min(len(p), blockMax) // one piece, one block, when it fits
			}
			if !sr.bodies.take(charged(sr.held+int64(size)) - charged(sr.held)) {
				// With the other answers being read at once, it would pass the cap
				// they share: said over the cap, as one past its own is.
				sr.over, sr.shared = true, true
				sr.blocks = nil
				sr.release()
				return
			}
			sr.held += int64(size)
			sr.blocks = append(sr.blocks, make([]byte, 0, size))
			n++
		}
		b := sr.blocks[n-1]
		k := min(len(p), cap(b)-len(b))
		sr.blocks[n-1] = append(b, p[:k]...)
		p = p[k:]
	}
}

// dispatch ends the event under way; dispatched is false when it had no data (the
// standard dispatches nothing then; MCP servers send such events to set an id).
func (sr *sseReader) dispatch() (ev sseEvent, dispatched bool) {
	defer sr.reset()
	if !sr.data || sr.told {
		return sseEvent{}, false
	}
	ev = sseEvent{Name: string(sr.name), Size: sr.size}
	switch {
	case sr.over:
		ev.TooLong = true
	case len(sr.blocks) == 1:
		ev.Data = sr.blocks[0]
	default:
		ev.Data = make([]byte, 0, sr.size)
		for _, b := range sr.blocks {
			ev.Data = append(ev.Data, b...)
		}
	}
	if ev.Data == nil && !ev.TooLong {
		ev.Data = []byte{}
	}
	if !ev.TooLong {
		ev.Held, sr.held = charged(sr.held), 0 // the event's now, given back when passed on
	}
	return ev, true
}

func (sr *sseReader) reset() {
	sr.name = sr.name[:0]
	sr.blocks = nil
	sr.size = 0
	sr.data = false
	sr.over = false
	sr.told = false
	sr.shared = false
	sr.release()
}

// release gives back what the event being read holds of the shared budget.
func (sr *sseReader) release() {
	sr.bodies.give(charged(sr.held))
	sr.held = 0
}

func indexEOL(b []byte) int {
	// Most lines end in LF; a CR, when there is one, ends the line before it.
	lf := bytes.IndexByte(b, '\n')
	search := b
	if lf >= 0 {
		search = b[:lf]
	}
	if cr := bytes.IndexByte(search, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

func appendCapped(dst, p []byte) []byte {
	if room := smallFields - len(dst); room < len(p) {
		p = p[:max(room, 0)]
	}
	return append(dst, p...)
}

func digits(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func (ev sseEvent) String() string {
	return fmt.Sprintf("event %q (%d bytes)", ev.Name, ev.Size)
}
