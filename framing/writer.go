package framing

import (
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
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, coalesceMax+1)}
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
	if len(w.buf)+len(msg)+1 <= cap(w.buf) {
		w.buf = append(append(w.buf, msg...), '\n')
		return nil
	}
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
