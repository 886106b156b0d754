package upstream

import (
	"errors"
	"fmt"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Streamer is a Conn that can hand a long message on as it arrives rather than whole
// (docs/ARCHITECTURE.md, "Long messages"): the stdio child, and session.Conn in front
// of it. A message is streamed only when its head says how it is routed and the
// handler takes it; everything else is read whole, as before.
type Streamer interface {
	// SetStream makes messages of at least threshold bytes go to h when h takes
	// them (threshold <= 0: none). Call it before the first Read, or from the
	// goroutine that reads.
	SetStream(threshold int, h StreamHandler)
}

// StreamHandler is the reader's side of streamed messages: the relay.
type StreamHandler interface {
	// StartStream is asked, on the goroutine that reads, once a long message's head
	// says its routing: its top-level id (raw; nil for a notification) and method
	// (raw; nil for an answer). It returns where the message goes, or nil to have
	// it read whole.
	StartStream(id, method []byte) StreamSink
}

// StreamSink takes one streamed message.
type StreamSink interface {
	// Write takes the next piece, in order, never a newline; p is not kept after.
	Write(p []byte)
	// End says the message is over (see StreamEnd).
	End(StreamEnd)
}

// StreamEnd is what a streamed message turned out to be.
type StreamEnd struct {
	// OK says it was a message by the rules a whole line is judged by (IsMessage,
	// and a line the server's end cut off is one only when whole and valid). When
	// it was not, what was passed on is not a message either: the sink ends the line
	// so that what follows it stays whole, and the Conn then stands in for it as for
	// a line over the cap (the request it answered gets an error answer).
	OK bool
	// ID, Method and Answer are its top-level id and method and whether it is an
	// answer, read over all of it: of duplicates the last, as the host's JSON.parse
	// keeps, which may not be what the head said.
	ID, Method []byte
	Answer     bool
	// Error says it had a top-level "error" member (an answer that is an error).
	Error bool
	// More says the line held more than one value (which JSON.parse refuses).
	More bool
	Size int64
	Why  string // when not OK: what was wrong, for the log
}

// streamLine judges a streamed line as it passes to the handler's sink, by the rules a
// whole line is judged by (IsMessage), keeping none of it: a line up to smallLine is
// validated in full as it passes (jsonlex.Validator), a longer one is judged by its
// first two tokens' bytes and its last byte that is not whitespace.
type streamLine struct {
	p      *Process
	sink   StreamSink
	v      jsonlex.Validator
	judged bool  // IsMessage said it is one, all of it read already: v is not needed
	n      int64 // bytes seen
	lead   int64 // blanks before the first token
	lastAt int64 // bytes up to the last that is not blank: IsMessage trims the rest
	shape  shape
	seeing int // 0: before the first token, 1: before the second, 2: past both
}

func (s *streamLine) Write(piece []byte) {
	for i := 0; i < len(piece) && s.seeing < 2; i++ {
		switch c := piece[i]; {
		case s.seeing == 0 && !isBlank(c, true):
			s.shape.first, s.seeing = c, 1
		case s.seeing == 0:
			s.lead++
		case s.seeing == 1 && !isBlank(c, false):
			s.shape.second, s.seeing = c, 2
		}
	}
	// IsMessage validates a line whose trimmed size is up to smallLine: what is
	// validated starts at its first token.
	if budget := s.lead + smallLine + 1 - s.n; budget > 0 && !s.judged {
		s.v.Write(piece[:min(int64(len(piece)), budget)])
	}
	for i := len(piece) - 1; i >= 0; i-- {
		if c := piece[i]; !isBlank(c, true) {
			s.shape.last = c
			s.lastAt = s.n + int64(i) + 1
			break
		}
	}
	s.n += int64(len(piece))
	s.sink.Write(piece)
}

// isBlank is JSON whitespace: around a line, and (nl false) between its first two
// tokens as IsMessage trims them.
func isBlank(c byte, nl bool) bool {
	return c == ' ' || c == '\t' || c == '\r' || nl && c == '\n'
}

func (s *streamLine) End(e framing.LineEnd) {
	pk := e.Peek
	out := StreamEnd{ID: pk.ID, Method: pk.Method, Answer: pk.Answer, Error: pk.Error, More: pk.More, Size: e.Size}
	small := s.lastAt-min(s.lead, s.lastAt) <= smallLine // as IsMessage trims it
	whole := small && (s.judged || s.v.Valid()) && s.shape.ends()
	if e.Cut && !small {
		// Read whole, a line the stream's end cut is validated in full whatever its
		// size; here what is past 1 MiB was only scanned. It is whole when its object
		// closed, with nothing after it, and it has a message's shape: a cut inside
		// it (the usual death mid-line) leaves the object open. Judged so, a valid
		// answer the server did not end with a newline is not followed by an error
		// answer for the same id.
		whole = pk.Done() && !pk.Broken() && !pk.More && s.shape.ok()
	}
	switch {
	case e.Over:
		out.Why = fmt.Sprintf("more than %d bytes, over the --max-message cap of %d", e.Size, e.Max)
	case e.Cut && !whole:
		out.Why = fmt.Sprintf("cut off after %d bytes by the server's end", e.Size)
	case small:
		out.OK = whole
	default:
		out.OK = s.shape.ok()
	}
	if !out.OK && out.Why == "" {
		out.Why = fmt.Sprintf("not JSON (%d bytes)", e.Size)
	}
	s.sink.End(out)
	if !out.OK {
		s.p.log.Warn("a message from the server that was being passed on as it arrived turned out not to be one; its line was ended there", "why", out.Why, "bytes", e.Size)
		s.p.standIn = s.p.refuseTooLong(&framing.TooLongError{Size: e.Size, Max: e.Max, ID: pk.IDOrNull(), Method: pk.Method, Early: e.Over}, out.Why)
	}
}

// SetStream makes the child's long messages stream (Streamer).
func (p *Process) SetStream(threshold int, h StreamHandler) {
	if h == nil {
		p.out.SetStream(0, nil)
		return
	}
	p.out.SetStream(threshold, func(pk *jsonlex.Peek) framing.LineSink {
		line := p.out.Offered()
		if line != nil && !IsMessage(line) {
			// All of it is here, and it is no message: read whole, it is dropped
			// (shown on stderr) as any such line, where streamed it would have
			// reached the host, cut off, before its end could say so.
			return nil
		}
		sink := h.StartStream(pk.ID, pk.Method)
		if sink == nil {
			return nil
		}
		// A line judged whole here is not validated again as it passes.
		return &streamLine{p: p, sink: sink, judged: line != nil}
	})
}

// shape is what IsMessage looks at in a line too long to validate: its first byte
// that is not whitespace, the next one after it, and its last one.
type shape struct{ first, second, last byte }

func (h shape) ends() bool {
	return h.first == '{' && h.last == '}' || h.first == '[' && h.last == ']'
}

// ok is IsMessage's judgement of a line too long to validate.
func (h shape) ok() bool {
	if !h.ends() || h.second == 0 {
		return false
	}
	// "[INFO] server ready]" has the right ends; a JSON array's next token does not
	// start with a letter other than those of true/false/null.
	if h.first == '[' {
		switch c := h.second; {
		case c == '{' || c == '[' || c == '"' || c == ']' || c == '-' || (c >= '0' && c <= '9'):
		case c == 't' || c == 'f' || c == 'n':
		default:
			return false
		}
		return true
	}
	return h.second == '"' || h.second == '}'
}

// LineWriter is a Conn that can take a long message in pieces, as the host writes
// it: the relay streams a long tools/call to the server instead of holding it
// (docs/ARCHITECTURE.md, "Long messages"). The stdio child, and session.Conn in front
// of it.
type LineWriter interface {
	// BeginLine starts one message written in pieces. What else is written to the
	// Conn meanwhile waits behind it, bounded: past the bound the message is ended
	// early, and End says framing.ErrLineCut. It fails when the Conn cannot take a
	// message in pieces now (no server is serving): the caller writes it whole.
	BeginLine() (LinePart, error)
}

// LinePart is one message being written in pieces (LineWriter).
type LinePart interface {
	// Part writes the next piece, never a newline. After an error the message
	// reached the server cut off, if at all.
	Part(p []byte) error
	// End ends the message with its newline.
	End() error
}

// BeginLine starts a message written to the child in pieces (LineWriter).
func (p *Process) BeginLine() (LinePart, error) {
	if err := p.in.Begin(); err != nil {
		return nil, p.writeFailed(err)
	}
	return processLine{p}, nil
}

type processLine struct{ p *Process }

func (l processLine) Part(b []byte) error {
	if err := l.p.in.Part(b); err != nil {
		return l.p.writeFailed(err)
	}
	return nil
}

func (l processLine) End() error {
	err := l.p.in.End()
	if err != nil && !errors.Is(err, framing.ErrLineCut) {
		return l.p.writeFailed(err)
	}
	return err
}
