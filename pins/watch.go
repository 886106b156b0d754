package pins

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// The modes of --pin-tools.
const (
	ModeWarn  = "warn"  // say a drift on stderr; change no byte
	ModeBlock = "block" // hide drifted tools and refuse their calls
	ModeOff   = "off"   // pin nothing, write nothing
)

// ParseMode reads a --pin-tools value.
func ParseMode(s string) (string, error) {
	switch s {
	case ModeWarn, ModeBlock, ModeOff:
		return s, nil
	case "":
		return ModeWarn, nil
	}
	return "", errors.New(`want warn, block or off`)
}

// Watcher is one proxy's side of the pins of its server: it is told every tools/list
// answer page as it passes (Listed), pins a server's tools on first sight, says each
// drift once a session, records what it saw for `bir-proxy pins`, and, in block mode,
// says which tools are hidden (Hidden). The store is written off the caller's path, by
// a goroutine of its own; Close waits for the last write, boundedly.
type Watcher struct {
	store    Store
	server   string
	mode     string
	readOnly bool // --read-only: only tools read-only now and in their pin are shown
	log      *slog.Logger

	mu       sync.Mutex
	pinned   map[string]Def
	have     bool // a pin file was there (or has been written) for the server
	stamp    fs.FileInfo
	bad      bool // the pin file cannot be read: said once, left alone
	r        *reader
	listing  []Def
	started  bool      // the listing began with a first page (no cursor)
	full     bool      // the listing reached MaxTools: said once, no more read
	pinning  bool      // the listing is the first seen: each of its pages is pinned
	pinnedAt time.Time // when it began
	warned   map[string]bool
	said     int          // drift lines written this session (maxDriftLines)
	drift    func(Status) // OnDrift: each drift said, for the journal

	hidden atomic.Pointer[map[string]bool]
	shown  atomic.Pointer[map[string]bool] // --read-only: the tools shown

	// The writer: the newest change waits in next; one goroutine writes it.
	wmu     sync.Mutex
	next    func(f *File) bool
	writing bool
	idle    chan struct{} // closed by the writer when it has nothing left
}

// maxDriftLines bounds the drift lines of one session: a server whose list changes
// on every call must not flood the host's log.
const maxDriftLines = 20

// NewWatcher watches server's tool listings in mode. readOnly is --read-only: then
// only the tools annotated readOnlyHint true now and in their pin (when pinned) are
// shown and callable (Hidden). In ModeOff (with readOnly) nothing is pinned or written.
func NewWatcher(store Store, server, mode string, readOnly bool, log *slog.Logger) *Watcher {
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{store: store, server: server, mode: mode, readOnly: readOnly, log: log, warned: map[string]bool{}, r: newReader()}
	if mode == ModeOff {
		w.pinned, w.have = map[string]Def{}, true // nothing pinned, nothing to pin
	} else {
		w.reload()
	}
	return w
}

// reload reads the pins again when the file changed (`pins approve` or `pins reset`
// by another process, another proxy's first sight). Under mu.
func (w *Watcher) reload() {
	w.wmu.Lock()
	pending := w.writing
	w.wmu.Unlock()
	if pending && w.pinned != nil {
		// Our own write is under way: the file is behind what we hold. Read back
		// then, a first sight's first page, written, replaced the pins of its later
		// pages, and the next listing called those tools new (TestPinsDriftInJournal,
		// under load). Another process's change is read at the next listing.
		return
	}
	stamp := w.store.Stamp(w.server)
	if w.pinned != nil && sameStamp(stamp, w.stamp) {
		return
	}
	w.stamp = stamp
	f, err := w.store.Load(w.server)
	switch {
	case errors.Is(err, ErrNoPins):
		w.pinned, w.have, w.bad = map[string]Def{}, false, false
		clear(w.warned) // reset: the next listing is pinned afresh
	case err != nil:
		if !w.bad {
			w.log.Warn("tool pins cannot be read; drift is not checked", "err", err)
		}
		w.pinned, w.have, w.bad = map[string]Def{}, true, true
	default:
		// A tool whose pin changed (approved, or reset and pinned again) is said
		// again if it drifts again; a write of what was seen changes no pin.
		for name := range w.warned {
			if old, now := w.pinned[name], f.Pinned[name]; old.Body != now.Body || old.Name != now.Name {
				delete(w.warned, name)
			}
		}
		w.pinned, w.have, w.bad = f.Pinned, true, false
	}
}

// Listed is told one tools/list result passing to the host; first says its request
// had no cursor (a listing starts). It returns the statuses of the listing so far.
// It reads no disk but a stat of the pin file, and never waits on a write.
func (w *Watcher) Listed(result []byte, first bool) []Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mode != ModeOff {
		w.reload()
	}
	if first || !w.started && len(w.listing) == 0 {
		if len(w.listing) > 0 {
			w.pinning = false // a listing after the first is compared, not pinned
		}
		w.listing, w.started, w.full, w.r = w.listing[:0], first, false, newReader()
	}
	more := Page(result, func(tool []byte) {
		if len(w.listing) >= MaxTools {
			if !w.full {
				w.full = true
				w.log.Warn("a tool list past the pin bound; the rest is not pinned or compared",
					"bound", MaxTools)
			}
			return
		}
		if d, ok := w.r.read(tool); ok {
			w.listing = append(w.listing, d)
		}
	})
	complete := !more && w.started && !w.full
	if w.bad {
		return nil
	}
	if !w.have || w.pinning {
		// First sight: what this server lists now, every page of it, is what the
		// user trusts.
		if !w.pinning {
			w.pinnedAt = time.Now().UTC()
		}
		w.pinning = true
		listed, startedAt := append([]Def(nil), w.listing...), w.pinnedAt
		for _, d := range listed {
			w.pinned[d.Name] = d
		}
		w.have = true
		w.write(func(f *File) bool {
			if !f.PinnedAt.IsZero() && f.PinnedAt.Before(startedAt) {
				return false // another proxy pinned first: its pins stand
			}
			for _, d := range listed {
				f.Pinned[d.Name] = d
			}
			f.PinnedAt = startedAt
			f.Seen = &Listing{At: time.Now().UTC(), Complete: complete, Tools: listed}
			return true
		})
	}
	st := Compare(w.pinned, w.listing, complete)
	hidden := map[string]bool{}
	if w.readOnly {
		// Shown only when read-only now and, pinned, in its pin: the hint is the
		// server's word, and the pin keeps it to its word (docs/pins.md).
		for _, d := range w.listing {
			p, pinned := w.pinned[d.Name]
			if !d.ReadOnly || pinned && !p.ReadOnly {
				hidden[d.Name] = true
			}
		}
	}
	changedSeen := false
	for _, s := range st {
		if !s.Drifted() || w.mode == ModeOff {
			continue
		}
		if w.mode == ModeBlock {
			hidden[s.Name] = true
		}
		changedSeen = true
		if !w.warned[s.Name] {
			w.warned[s.Name] = true
			switch w.said++; {
			case w.said <= maxDriftLines:
				w.say(s)
				if w.drift != nil {
					w.drift(s)
				}
			case w.said == maxDriftLines+1:
				w.log.Warn("tool drift: more tools drifted than are said one by one; bir-proxy pins lists them all")
			}
		}
	}
	shown := map[string]bool{}
	for _, d := range w.listing {
		if !hidden[d.Name] {
			shown[d.Name] = true
		}
	}
	w.hidden.Store(&hidden)
	w.shown.Store(&shown)
	if w.mode != ModeOff && (changedSeen || complete) {
		listed, at := append([]Def(nil), w.listing...), time.Now().UTC()
		w.write(func(f *File) bool {
			f.Seen = &Listing{At: at, Complete: complete, Tools: listed}
			return true
		})
	}
	return st
}

// OnDrift has fn told each drift the watcher says on stderr (once a session per tool,
// up to the same bound): the proxy journals it (journal.Drift). fn is called with the
// watcher's lock held, on whatever path showed it the listing (in block mode the
// server's pump): it must not block. Set before the first Listed.
func (w *Watcher) OnDrift(fn func(Status)) { w.drift = fn }

// say writes the one stderr line of a drifted tool.
func (w *Watcher) say(s Status) {
	what := "tool drift: " + s.Status
	// The logger names the server (the proxy's does): said again, it was
	// "server=p server=p".
	args := []any{"tool", s.Name}
	switch s.Status {
	case StatusChanged:
		args = append(args, "changed", strings.Join(s.Changed, ","))
	case StatusRenamed:
		args = append(args, "from", s.From)
	}
	if w.mode == ModeBlock {
		what += "; hidden from the host until approved (bir-proxy pins approve)"
	} else {
		what += " (bir-proxy pins diff / pins approve)"
	}
	w.log.Warn(what, args...)
}

// Hidden says the tool named name is hidden from the host, its calls refused: in
// block mode a drifted tool; under --read-only any tool not shown, one never listed
// included.
func (w *Watcher) Hidden(name string) bool {
	if w.readOnly {
		s := w.shown.Load()
		return s == nil || !(*s)[name]
	}
	if w.mode != ModeBlock {
		return false
	}
	h := w.hidden.Load()
	return h != nil && (*h)[name]
}

// HiddenWhy is the message of the refusal of a call of a hidden tool: what hid it,
// and the command that would show it again.
func (w *Watcher) HiddenWhy(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.hidden.Load(); h != nil && (*h)[name] && w.mode == ModeBlock {
		if _, pinned := w.pinned[name]; pinned {
			return fmt.Sprintf("bir-proxy: tool %q changed since it was pinned, and is held back until approved: bir-proxy pins diff %s %s; bir-proxy pins approve %s %s",
				clipName(name), w.server, clipName(name), w.server, clipName(name))
		}
		return fmt.Sprintf("bir-proxy: tool %q is new since the server's tools were pinned, and is held back until approved: bir-proxy pins approve %s %s",
			clipName(name), w.server, clipName(name))
	}
	if w.readOnly {
		return fmt.Sprintf("bir-proxy: tool %q is not read-only (--read-only shows only tools annotated readOnlyHint: true, now and in their pin)", clipName(name))
	}
	return ""
}

// clipName bounds a tool name a message repeats.
func clipName(s string) string {
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Mode is the watcher's --pin-tools mode (ModeOff with --read-only alone, or under
// BIR_OFF): in ModeOff nothing is pinned, and every tool would read as new.
func (w *Watcher) Mode() string { return w.mode }

// Enforces says the watcher hides tools (block mode, --read-only): it must see each
// listing on the server's pump, before the answer is cut and forwarded.
func (w *Watcher) Enforces() bool { return w.readOnly || w.mode == ModeBlock }

// write hands a change to the writer goroutine: only the newest waiting change is
// kept (each holds the whole listing), and none waits on the disk.
func (w *Watcher) write(change func(f *File) bool) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if prev := w.next; prev != nil {
		// Both must apply: a first sight's pins with a later listing's Seen.
		cur := change
		change = func(f *File) bool { a := prev(f); b := cur(f); return a || b }
	}
	w.next = change
	if w.writing {
		return
	}
	w.writing = true
	w.idle = make(chan struct{})
	go w.writer(w.idle)
}

func (w *Watcher) writer(idle chan struct{}) {
	defer close(idle)
	for {
		w.wmu.Lock()
		change := w.next
		w.next = nil
		if change == nil {
			w.writing = false
			w.wmu.Unlock()
			return
		}
		w.wmu.Unlock()
		if err := w.store.Update(w.server, change); err != nil {
			w.log.Warn("tool pins not saved", "err", err)
		}
	}
}

// Close waits for the last write, up to wait.
func (w *Watcher) Close(wait time.Duration) {
	w.wmu.Lock()
	idle := w.idle
	w.wmu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		w.log.Warn("tool pins: the last write did not finish")
	}
}
