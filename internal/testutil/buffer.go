package testutil

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
)

// SyncBuffer is a log sink several goroutines (or a child's stderr copier) write while
// a test reads it. Every write is an event a test can wait on (WaitFor, Changed), so
// it never has to sleep to see a line appear. The zero value is ready to use.
type SyncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced by every write
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return n, err
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Changed returns a channel closed by the next write.
func (s *SyncBuffer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// WaitFor waits until the buffer holds sub, or ctx ends.
func (s *SyncBuffer) WaitFor(ctx context.Context, sub string) error {
	if err := s.WaitUntil(ctx, func(text string) bool { return strings.Contains(text, sub) }); err != nil {
		return fmt.Errorf("waiting for %q: %w", sub, err)
	}
	return nil
}

// WaitUntil waits until cond holds for everything written so far, or ctx ends. cond is
// looked at again after every write.
func (s *SyncBuffer) WaitUntil(ctx context.Context, cond func(text string) bool) error {
	for {
		changed := s.Changed() // before looking, so a write in between is not missed
		text := s.String()
		if cond(text) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w; the buffer holds %q", ctx.Err(), text)
		}
	}
}
