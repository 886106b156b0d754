package relay

import "time"

// Forward and NoteUpstream give benchmarks in relay_test the pumps' per-message steps
// without the pumps' reads and goroutines.
func (r *Relay) Forward(msg []byte, readAt time.Time) bool { return r.forward(msg, readAt) }

func (r *Relay) NoteUpstream(msg []byte, readAt time.Time) bool {
	return r.noteUpstream(msg, false, readAt)
}
