package framing

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// coalesceMax bounds the writer's buffer: messages up to this size are copied into it so
// that several messages and their newlines leave in one write syscall; larger ones are
// written in place, then the newline.
const coalesceMax = 64 << 10

// Writer writes messages as newline-terminated lines. It is safe for concurrent use:
// each message and its newline are written under one lock, so messages from different
// senders (relayed responses, the proxy's own requests) never interleave.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte // held lines not yet written, then scratch for the next write

	// While a line is written in pieces (Begin … End), what others write waits in
	// after, behind it; cond wakes a writer waiting for room there, or to begin.
	streaming bool
	after     []byte
	cond      sync.Cond
	// cut says the line being written in pieces was ended early (add, past
	// afterMax): its remaining Parts are dropped, and End reports ErrLineCut.
	// inPart says a Part is writing outside the lock: nothing else may write then.
	cut, inPart bool
}

// ErrLineCut is End's report that the line written in pieces was ended before its
// end: what others wrote behind it passed afterMax while it stalled, so it was ended
// there with its newline, and the rest of it was dropped. Its reader did not get it
// whole.
var ErrLineCut = errors.New("framing: the streamed line was ended early: too much was waiting behind it")

// afterMax bounds what others may queue behind a line written in pieces: a server
// that stalls in the middle of a 64 MB line must not make the proxy's own answers
// wait (nor the pump that sends them), but nor may they grow without bound. Past it
// the line is ended early (ErrLineCut), not waited for: a line stalled for good
// would otherwise stall its waiting writers for good.
const afterMax = 16 << 20

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{w: w, buf: make([]byte, 0, coalesceMax+1)}
	wr.cond.L = &wr.mu
	return wr
}

// Begin starts one line written in pieces (Part, then End): a line streamed from
// framing.Reader.SetStream. Held messages go first. Until End, messages written by
// others are queued behind the line, not interleaved into it. One line at a time.
func (w *Writer) Begin() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.streaming {
		w.cond.Wait()
	}
	w.streaming = true
	return w.flush()
}

// Part writes the next piece of the line Begin started; only its caller may call it.
// It contains no newline.
func (w *Writer) Part(p []byte) error {
	w.mu.Lock()
	if w.cut {
		w.mu.Unlock()
		return nil // ended early (add): the rest of the line is dropped
	}
	w.inPart = true
	w.mu.Unlock()
	_, err := w.w.Write(p)
	w.mu.Lock()
	w.inPart = false
	w.cond.Broadcast()
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("writing %d bytes of a streamed message: %w", len(p), err)
	}
	return nil
}

// End ends the line Begin started with its newline, and writes what was queued
// behind it, in one write.
func (w *Writer) End() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		w.cut = false
		return ErrLineCut
	}
	w.streaming = false
	w.cond.Broadcast()
	out := append(append(w.buf[:0], '\n'), w.after...)
	w.after = w.after[:0]
	if cap(w.after) > coalesceMax {
		w.after = nil // do not keep a grown queue for the whole session
	}
	_, err := w.w.Write(out)
	w.buf = out[:0]
	if cap(w.buf) > 4*coalesceMax {
		w.buf = make([]byte, 0, coalesceMax+1)
	}
	if err != nil {
		return fmt.Errorf("ending a streamed message: %w", err)
	}
	return nil
}

// Write writes msg followed by "\n", after any held messages. msg must not contain a
// newline (Reader never returns one with a newline, and JSON encoders never emit one
// raw inside a message).
func (w *Writer) Write(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.add(msg); err != nil {
		return err
	}
	return w.flush()
}

// Hold is Write, except that a small message may wait in the buffer until the next
// Write or Flush. A relay holds a message only when it already has the next one in
// hand: under load, dozens of messages then leave in one syscall, while a lone
// message is never held.
func (w *Writer) Hold(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.add(msg)
}

// Flush writes any held messages.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

// add appends msg to the held lines, or writes it straight out (after them) when it is
// too big to copy: copying a large message only to append one byte would double the
// proxy's memory for exactly the messages where memory matters.
func (w *Writer) add(msg []byte) error {
	if !w.streaming {
		// The usual case, no line being written in pieces: held with the others.
		if len(w.buf)+len(msg)+1 <= cap(w.buf) {
			w.buf = append(append(w.buf, msg...), '\n')
			return nil
		}
		return w.addBig(msg)
	}
	full := func() bool { return w.streaming && len(w.after) > 0 && len(w.after)+len(msg)+1 > afterMax }
	for full() && w.inPart {
		w.cond.Wait() // a piece being written: the newline goes after it
	}
	if full() {
		// The line has stalled with afterMax waiting behind it. Waiting for it
		// would stall whoever writes here (the host pump, which then reads no more
		// of the host, not even its end), for as long as its writer pleases: the
		// line is ended here instead, with its newline (its reader rejects that
		// one line, and what follows stays whole), and what waited goes out.
		w.streaming, w.cut = false, true
		w.cond.Broadcast()
		out := append(append(w.buf[:0], '\n'), w.after...)
		w.after = nil
		_, err := w.w.Write(out)
		w.buf = make([]byte, 0, coalesceMax+1)
		if err != nil {
			return fmt.Errorf("ending a stalled streamed message early: %w", err)
		}
	}
	if w.streaming {
		w.after = append(append(w.after, msg...), '\n')
		return nil
	}
	if len(w.buf)+len(msg)+1 <= cap(w.buf) {
		w.buf = append(append(w.buf, msg...), '\n')
		return nil
	}
	return w.addBig(msg)
}

// addBig is add of a message that does not fit in what is left of the buffer: the
// held lines go first, then it is held, or written in place when it is too big to copy.
func (w *Writer) addBig(msg []byte) error {
	if err := w.flush(); err != nil {
		return err
	}
	if len(msg) < coalesceMax {
		w.buf = append(append(w.buf, msg...), '\n')
		return nil
	}
	if _, err := w.w.Write(msg); err != nil {
		return fmt.Errorf("writing a %d-byte message: %w", len(msg), err)
	}
	w.buf = append(w.buf, '\n')
	return nil
}

func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.w.Write(w.buf)
	n := len(w.buf)
	w.buf = w.buf[:0]
	if err != nil {
		return fmt.Errorf("writing %d bytes of messages: %w", n, err)
	}
	return nil
}
