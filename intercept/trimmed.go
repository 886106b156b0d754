package intercept

import (
	"sync"
	"sync/atomic"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// trimNotes are the answers to host calls the result budget cut (docs/budget.md), by
// IDKey, with their spill files: said on the server's pump (Trimmed) before the
// answer reaches bookkeeping, taken by the call's report.
type trimNotes struct {
	mu sync.Mutex
	m  map[string]string
	n  atomic.Int64
}

// maxTrimNotes bounds the notes: past it a cut answer's report does not say so (its
// call would have to be one of 4,096 answered and not yet read by bookkeeping).
const maxTrimNotes = 4096

// Trimmed tells ic that the host got the answer of the raw id cut to the result
// budget, the whole answer being in the file spill ("" when it could not be kept):
// the call's report says trimmed and spill. It is called on the server's pump before
// FromUpstream of that answer, and does not wait.
func (ic *Interceptor) Trimmed(id []byte, spill string) {
	if ic.tracker == nil {
		return // no reports (BIR_OFF)
	}
	tn := &ic.tracker.trims
	tn.mu.Lock()
	if tn.m == nil {
		tn.m = make(map[string]string)
	}
	if len(tn.m) < maxTrimNotes {
		tn.m[jsonlex.IDKey(id)] = spill
		tn.n.Store(int64(len(tn.m)))
	}
	tn.mu.Unlock()
}

// take returns the note of the answer with the raw id, if there is one.
func (tn *trimNotes) take(id []byte) (spill string, ok bool) {
	if tn.n.Load() == 0 {
		return "", false
	}
	k := jsonlex.IDKey(id)
	tn.mu.Lock()
	spill, ok = tn.m[k]
	if ok {
		delete(tn.m, k)
		tn.n.Store(int64(len(tn.m)))
	}
	tn.mu.Unlock()
	return spill, ok
}
