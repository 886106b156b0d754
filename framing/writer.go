package framing

import (
	"fmt"
	"io"
	"sync"
)

// coalesceMax is the largest message copied into the writer's buffer so that message and
// newline leave in one write syscall; larger ones are written in place, then the newline.
const coalesceMax = 64 << 10

// Writer writes messages as newline-terminated lines. It is safe for concurrent use:
// each message and its newline are written under one lock, so messages from different
// senders (relayed responses, the proxy's own requests) never interleave.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, coalesceMax+1)}
}

// Write writes msg followed by "\n". msg must not contain a newline (Reader never returns
// one with a newline, and JSON encoders never emit one raw inside a message).
func (w *Writer) Write(msg []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(msg) <= coalesceMax {
		w.buf = append(append(w.buf[:0], msg...), '\n')
		if _, err := w.w.Write(w.buf); err != nil {
			return fmt.Errorf("writing a %d-byte message: %w", len(msg), err)
		}
		return nil
	}
	// Copying a large message only to append one byte would double the proxy's memory
	// for exactly the messages where memory matters.
	if _, err := w.w.Write(msg); err != nil {
		return fmt.Errorf("writing a %d-byte message: %w", len(msg), err)
	}
	if _, err := w.w.Write(append(w.buf[:0], '\n')); err != nil {
		return fmt.Errorf("writing a %d-byte message: %w", len(msg), err)
	}
	return nil
}
