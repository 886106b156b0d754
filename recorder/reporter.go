// Package recorder delivers step reports to the local recorder (SPEC §5): discovery,
// registration, posting, and the on-disk spool that makes sure nothing is lost.
package recorder

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/report"
)

// maxQueued bounds the reports waiting for the disk (by estimated size). Past it, new
// reports are dropped with a warning rather than letting a stuck disk grow the proxy
// until the host's session dies with it.
const maxQueued = 64 << 20

// DefaultSpoolMax is the default bound of one server's spool: weeks of normal use. A
// report is typically 1–4 KiB (64 KiB at most), so a busy day of 1,000 calls is a few
// MB and 256 MiB holds two months of them with the recorder down.
const DefaultSpoolMax = 256 << 20

// MinSpoolMax is the least a spool may be bounded to: a few reports at their largest.
const MinSpoolMax = 256 << 10

// closeGrace bounds how long Close waits for delivery to finish, whatever its ctx.
const closeGrace = 2 * time.Second

// Upstream says how the proxy reaches its server, for the register call.
type Upstream struct {
	Transport string   `json:"transport"` // "stdio", "http" or "sse"
	Command   []string `json:"command,omitempty"`
	URL       string   `json:"url,omitempty"`
}

// Config configures Open.
type Config struct {
	// Endpoint is the recorder (from Discover); nil writes the journal instead.
	Endpoint *Endpoint
	Server   string // the --server name
	Version  string // bir-proxy's version
	PID      int    // 0 is os.Getpid()
	Upstream Upstream
	// StateDir holds the spool and the default journal; "" is DefaultStateDir().
	StateDir string
	// JournalPath is the journal file; "" is <StateDir>/journal/<server>.jsonl.
	JournalPath string
	// JournalMaxBytes is the size at which the journal is rotated (0:
	// journal.DefaultMaxBytes); JournalKeep is how many rotated files are kept besides
	// the one being written (0: journal.DefaultKeep).
	JournalMaxBytes int64
	JournalKeep     int
	// Logger gets the package's diagnostics (stderr); nil is slog.Default().
	Logger *slog.Logger
	// SpoolMax bounds the spool of this server, this run's file and the files of
	// earlier runs it adopted, in bytes: past it the oldest reports are dropped.
	// 0 is DefaultSpoolMax; anything below MinSpoolMax is MinSpoolMax.
	SpoolMax int64

	tuning tuning // zero fields take their defaults; tests shorten them
}

// Reporter is an open Sink: it spools and delivers reports to the recorder, or
// appends them to the journal when there is no recorder.
type Reporter struct {
	proxyID string
	server  string
	log     *slog.Logger
	hooks   hooks
	window  time.Duration // writeWindow, unless a test says

	mu       sync.Mutex
	seq      uint64
	lines    []byte  // the queued reports, encoded: one line each
	queued   []entry // where each one's line is in lines (off, n), by seq
	closed   bool
	dropping bool

	wake      chan struct{} // a report was queued
	stop      chan struct{} // Close: commit what is queued, then end
	committed chan struct{} // closed when the commit loop has ended
	closeOnce sync.Once
	closeErr  error

	journal *journal.Writer // journal mode
	spool   *spoolFile
	d       *dispatcher // recorder mode
	adopted []string    // proxyIds of the earlier runs whose spool files this run took over (under mu)

	adoptDone    chan struct{} // closed when earlier runs' spool files have been looked at
	stopAdopting context.CancelFunc
}

var _ report.Sink = (*Reporter)(nil)

// Open starts a Reporter. With an Endpoint it creates this run's spool file, adopts
// the spool files of earlier runs of the same server whose proxy is gone, and starts
// delivery (registering in the background: a recorder that is down does not fail
// Open). Without one it opens the journal. Close must be called.
func Open(ctx context.Context, cfg Config) (*Reporter, error) {
	if cfg.Server == "" {
		return nil, errors.New("open recorder: no server name")
	}
	id, err := newProxyID()
	if err != nil {
		return nil, fmt.Errorf("open recorder: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	// The proxy's logger already names the server; naming it again here printed
	// server= twice on every line.
	log = log.With("component", "recorder")
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	stateDir := cfg.StateDir
	if stateDir == "" && (cfg.Endpoint != nil || cfg.JournalPath == "") {
		if stateDir, err = DefaultStateDir(); err != nil {
			return nil, fmt.Errorf("open recorder: %w", err)
		}
	}
	r := &Reporter{
		proxyID:   id,
		server:    cfg.Server,
		log:       log,
		hooks:     cfg.tuning.hooks,
		window:    writeWindow,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		committed: make(chan struct{}),
		adoptDone: make(chan struct{}),
	}
	if cfg.tuning.writeWindow > 0 {
		r.window = cfg.tuning.writeWindow
	}

	if cfg.Endpoint == nil {
		path := cfg.JournalPath
		if path == "" {
			path = journal.Path(stateDir, cfg.Server)
			for _, d := range []string{stateDir, journal.Dir(stateDir)} {
				if err := statedir.PrivateDir(d, log); err != nil {
					return nil, fmt.Errorf("open journal: %w", err)
				}
			}
		} else {
			// --journal: the directory is the user's choice, and not ours to chmod.
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, fmt.Errorf("open journal: %w", err)
			}
			statedir.WarnIfShared(filepath.Dir(path), log)
		}
		j, err := journal.Open(path, cfg.JournalMaxBytes, cfg.JournalKeep, log)
		if err != nil {
			return nil, err
		}
		r.journal = j
		go r.commitLoop()
		return r, nil
	}

	dir := spoolDir(stateDir)
	spoolOK := true
	if err := statedir.PrivateDir(stateDir, log); err != nil {
		log.Warn("cannot use the state directory; reports are kept in memory only", "err", err)
		spoolOK = false
	} else if err := statedir.PrivateDir(dir, log); err != nil {
		log.Warn("cannot use the spool directory; reports are kept in memory only", "err", err)
		spoolOK = false
	} else if r.spool, err = createSpool(dir, cfg.Server, id); err != nil {
		log.Warn("cannot create the spool file; reports are kept in memory only", "err", err)
	}
	r.d = newDispatcher(cfg, id, r.spool, nil, log)
	r.d.droppedFile = droppedPath(dir, cfg.Server)
	go r.d.run()
	go r.commitLoop()
	// Earlier runs' spool files are read in the background: a backlog of thousands of
	// reports takes a while to scan, and the host is waiting for its server to start.
	adoptCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.stopAdopting = cancel
	go func() {
		defer close(r.adoptDone)
		if !spoolOK {
			return
		}
		adopted := adoptSpools(adoptCtx, dir, cfg.Server, id, log)
		for _, a := range adopted {
			log.Info("delivering reports left by an earlier run", "proxyId", a.proxyID, "reports", len(a.entries))
		}
		r.mu.Lock()
		for _, a := range adopted {
			r.adopted = append(r.adopted, a.proxyID)
		}
		r.mu.Unlock()
		r.d.adopt(adopted)
	}()
	return r, nil
}

// ProxyID is this run's proxyId.
func (r *Reporter) ProxyID() string { return r.proxyID }

// Submit numbers the report, stamps it with the proxyId and server, encodes it and
// queues the line. It returns at once; the report reaches the spool or journal within
// milliseconds. Nothing of s is kept: its raw fields may be reused once Submit returns.
func (r *Reporter) Submit(s report.Step) {
	size := len(s.Args) + len(s.Result) + len(s.Error) + 512
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.log.Debug("report submitted after close; dropped", "tool", s.Tool)
		return
	}
	if len(r.lines)+size > maxQueued {
		warn := !r.dropping
		r.dropping = true
		r.mu.Unlock()
		if warn {
			r.log.Warn("reports are not reaching the disk fast enough; dropping new ones until they do")
		}
		return
	}
	r.dropping = false
	r.seq++
	s.ProxyID, s.Server, s.Seq = r.proxyID, r.server, r.seq
	// Encoded here, into the queue's one buffer: bookkeeping's buffers behind s's raw
	// fields are its own again as soon as this returns, and the commit loop only
	// writes. Only the report that finds the queue empty wakes the writer: the others
	// join a batch it has not taken yet, and skip waking a goroutine (a syscall when it
	// sleeps).
	start := len(r.lines)
	r.lines = append(s.AppendJSON(r.lines), '\n')
	r.queued = append(r.queued, entry{seq: s.Seq, off: int64(start), n: len(r.lines) - start - 1})
	// Also when the queue passes writeNow: the journal's write window does not hold
	// back that much.
	wake := start == 0 || start < writeNow && len(r.lines) >= writeNow
	r.mu.Unlock()
	if wake {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// Drift journals a tool's drift from its pin (journal.Drift: pins.Watcher said it),
// stamped with the proxyId and server, in journal mode. With a recorder it does
// nothing: SPEC §5 has no route for it, and stderr has said it. Like Submit it returns
// at once; the line is written with the reports around it.
func (r *Reporter) Drift(d journal.DriftOf, at time.Time) {
	if r.journal == nil {
		return
	}
	rec := journal.Drift{ProxyID: r.proxyID, Server: r.server, At: at, Drift: d}
	r.mu.Lock()
	if r.closed || len(r.lines)+journal.MaxDriftLine > maxQueued {
		r.mu.Unlock()
		return
	}
	start := len(r.lines)
	r.lines = append(rec.AppendJSON(r.lines), '\n')
	r.queued = append(r.queued, entry{off: int64(start), n: len(r.lines) - start - 1}) // no seq: not a report
	r.mu.Unlock()
	if start == 0 {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// Learned passes what the proxy learned about its upstream on to the recorder in a
// fresh register call. It does nothing in journal mode.
func (r *Reporter) Learned(f report.ServerFacts) {
	if r.d != nil {
		r.d.learn(f)
	}
}

// SettledTransport says which transport the upstream turned out to use ("http" or
// "sse"), once the connection knows: with --transport auto the registration at start
// says "http", the first try, and a fallback to HTTP+SSE is said in a fresh register
// call. It does nothing in journal mode or when nothing changed.
func (r *Reporter) SettledTransport(t string) {
	if r.d != nil {
		r.d.settleTransport(t)
	}
}

// Close stops accepting reports, commits every queued one to disk, gives delivery a
// short grace (bounded by ctx and by two seconds, and cut short when the recorder is
// failing), and returns. What is not delivered stays in the spool for the next run.
// Nothing the Reporter started outlives Close.
func (r *Reporter) Close(ctx context.Context) error {
	r.closeOnce.Do(func() { r.closeErr = r.close(ctx) })
	return r.closeErr
}

func (r *Reporter) close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.committed
	if r.stopAdopting != nil {
		r.stopAdopting()
		<-r.adoptDone
	}

	if r.journal != nil {
		err := r.journal.Close()
		if err != nil {
			return fmt.Errorf("close journal: %w", err)
		}
		return nil
	}
	return r.d.close(ctx)
}

// syncWindow bounds how long a written report may wait for its fsync. Writes happen at
// once (a report survives the proxy being SIGKILLed as soon as it is written); the fsync,
// which only a machine crash needs, is shared by every batch of the window. One fsync per
// call would put a disk flush on the machine between every two calls of a busy host.
const syncWindow = 50 * time.Millisecond

// writeWindow is how long reports may wait for the journal write after the last one:
// a sequential host makes a report every ~100 µs, and bookkeeping's turns (one per
// millisecond) each made a write of their own, the costliest syscall of a recording
// proxy at that pace. A turn's reports are written at once when the last write is
// older, or when they are many (writeNow). A SIGKILL loses at most this much more.
const writeWindow = 10 * time.Millisecond

// writeNow is how many bytes of reports are written without waiting for writeWindow.
const writeNow = 64 << 10

// commitLoop moves queued reports to disk, as many as have queued at each turn, and
// with a recorder hands them to delivery at once; written files are fsynced at most
// syncWindow later (a group commit). Both the journal and the spool file are written
// at most once a writeWindow, unless much is waiting. The timers run only while
// something is unwritten or unsynced: an idle proxy has none. The queue's buffers are
// reused from turn to turn; with a recorder, delivery gets a copy of a turn's lines.
func (r *Reporter) commitLoop() {
	defer close(r.committed)
	syncT := time.NewTimer(syncWindow)
	syncT.Stop()
	defer syncT.Stop()
	var syncC <-chan time.Time
	var spareLines []byte
	var spareQueued []entry
	// The journal's write window (writeWindow): waitT wakes the loop when it ends, and
	// runs only while reports wait for it.
	waitT := time.NewTimer(r.window)
	waitT.Stop()
	defer waitT.Stop()
	var waitC <-chan time.Time
	var lastWrite time.Time
	// With a recorder, a turn's reports go to delivery at once and wait here for the
	// spool write, which takes the turns of a write window together: a sequential
	// host's turns (one a millisecond) each made a write, and each report's done mark
	// another, until the recorder's answer usually came before the line was written.
	var spoolBuf []byte
	var spoolEnt []entry
	for {
		stopping := false
		select {
		case <-r.wake:
		case <-waitC:
			waitC = nil
		case <-syncC:
			syncC = nil
			r.sync()
			continue
		case <-r.stop:
			stopping = true // Submit no longer queues: this batch is the last
		}
		r.mu.Lock()
		if r.journal != nil && !stopping && len(r.lines) > 0 && len(r.lines) < writeNow {
			if wait := r.window - time.Since(lastWrite); wait > 0 {
				// Written soon, with what else comes meanwhile: Submit does not wake
				// the loop while these wait, the timer does.
				r.mu.Unlock()
				if waitC == nil {
					waitT.Reset(wait)
					waitC = waitT.C
				}
				continue
			}
		}
		lines, queued := r.lines, r.queued
		r.lines, r.queued = spareLines[:0], spareQueued[:0]
		r.mu.Unlock()
		written := false
		switch {
		case len(queued) == 0:
		case r.journal != nil:
			lastWrite = time.Now()
			r.commit(lines, queued)
			written = true
		default:
			r.handOver(lines, queued)
			if r.spool == nil {
				r.committedHook(len(queued))
				break
			}
			for _, e := range queued {
				spoolEnt = append(spoolEnt, entry{seq: e.seq, off: int64(len(spoolBuf)) + e.off, n: e.n})
			}
			spoolBuf = append(spoolBuf, lines...)
		}
		if len(spoolEnt) > 0 {
			if wait := r.window - time.Since(lastWrite); stopping || wait <= 0 || len(spoolBuf) >= writeNow {
				lastWrite = time.Now()
				r.writeSpool(spoolBuf, spoolEnt)
				written = true
				if cap(spoolBuf) > maxKeptLines {
					spoolBuf, spoolEnt = nil, nil
				}
				spoolBuf, spoolEnt = spoolBuf[:0], spoolEnt[:0]
			} else if waitC == nil {
				waitT.Reset(wait)
				waitC = waitT.C
			}
		}
		if written && syncC == nil {
			syncT.Reset(syncWindow)
			syncC = syncT.C
		}
		if written && waitC != nil && len(spoolEnt) == 0 {
			// Written before the window's end (much waited, or Close): nothing is
			// left for its timer.
			waitT.Stop()
			waitC = nil
		}
		if cap(lines) <= maxKeptLines {
			// Written, or copied for delivery and the spool: the buffers are free.
			spareLines, spareQueued = lines[:0], queued[:0]
		} else {
			spareLines, spareQueued = nil, nil
		}
		if stopping {
			if syncC != nil {
				r.sync()
			}
			return
		}
	}
}

// maxKeptLines bounds the journal's line buffer kept from turn to turn: one burst
// must not pin its buffer for the rest of the session.
const maxKeptLines = 4 << 20

func (r *Reporter) sync() {
	var err error
	switch {
	case r.journal != nil:
		err = r.journal.Sync()
	case r.spool != nil:
		err = r.spool.sync()
	}
	if err != nil {
		r.log.Warn("cannot flush reports to disk; they are written but may not survive a machine crash", "err", err)
	}
}

// commit writes one turn's reports: lines holds them, queued says where each is.
func (r *Reporter) commit(lines []byte, queued []entry) {
	if err := r.appendJournal(lines, queued); err != nil {
		r.log.Error("cannot write the journal; reports are lost", "reports", len(queued), "err", err)
	}
	r.committedHook(len(queued))
}

// committedHook tells a test that n reports reached the journal or spool file (or,
// with no spool file, delivery).
func (r *Reporter) committedHook(n int) {
	if r.hooks.committed != nil {
		r.hooks.committed(n)
	}
}

// journalChunk bounds one journal write: a backlog goes out in runs of whole lines of
// at most this much (or one line, when it is longer).
const journalChunk = 1 << 20

// appendJournal writes whole lines only: each write is a run of complete lines, so a
// reader or a second proxy appending to the same file never sees a line cut in two.
// Fsynced by commitLoop within syncWindow.
func (r *Reporter) appendJournal(lines []byte, queued []entry) error {
	from := 0
	for i, e := range queued {
		if end := int(e.off) + e.n + 1; end-from > journalChunk && int(e.off) > from {
			if err := r.journal.Write(lines[from:e.off]); err != nil {
				return err
			}
			from = int(e.off)
		}
		if i == len(queued)-1 {
			return r.journal.Write(lines[from:])
		}
	}
	return nil
}

// handOver starts delivery of a turn's reports, before they are written to the spool
// (writeSpool, at the end of the write window). The order matters for the recorder's
// view: a report reaches it without waiting for the window, or for the fsync (which
// costs a millisecond or more on a busy disk). Safety does not suffer: a report the
// recorder acknowledged before its line was written is delivered (its done mark goes
// into the file with the line), and one it did not is written within writeWindow
// (surviving a SIGKILL of the proxy) and fsynced within syncWindow after that
// (surviving a machine crash), inside SPEC §5's ~100 ms.
//
// Delivery keeps a copy of lines, the turn's, while the reports wait: one buffer of
// exactly their size per turn, not per report. (It kept the queue's own buffer, and
// the queue grew a new one for every turn, line by line: two thirds of the bytes a
// pipelined host's recording proxy allocated, and its GC.)
func (r *Reporter) handOver(lines []byte, queued []entry) {
	buf := bytes.Clone(lines)
	entries := make([]entry, len(queued))
	for i, e := range queued {
		// Capped: nothing appended to one report's bytes may run into the next's.
		entries[i] = entry{seq: e.seq, body: buf[e.off : e.off+int64(e.n) : e.off+int64(e.n)]}
	}
	r.d.add(entries)
}

// writeSpool writes the lines of a write window's turns (buf; each entry's off is where
// its line is in buf) to the spool file, in one write per piece of at most an eighth
// of the spool's bound, each after delivery has made room for it under the bound
// (makeRoom): checked after the write, the bound was passed by the write. Delivery may
// then read reports still waiting back from the file instead of holding them in
// memory.
func (r *Reporter) writeSpool(buf []byte, spooled []entry) {
	defer r.committedHook(len(spooled))
	piece := max(r.d.spoolMax/8, 1)
	for len(spooled) > 0 {
		k, from := 1, spooled[0].off
		end := from + int64(spooled[0].n) + 1
		for k < len(spooled) && spooled[k].off+int64(spooled[k].n)+1-from <= piece {
			end = spooled[k].off + int64(spooled[k].n) + 1
			k++
		}
		part := spooled[:k]
		for i := range part {
			part[i].off -= from
		}
		// Each report of the piece may bring a done mark that came first.
		r.d.makeRoom(end - from + int64(maxAckLine*k))
		base, err := r.spool.appendBatch(buf[from:end:end], part)
		if err != nil {
			r.log.Warn("spool write failed; these reports are kept in memory until delivered", "reports", len(spooled), "err", err)
			return
		}
		for i := range part {
			part[i].off += base
		}
		r.d.spooled(part)
		spooled = spooled[k:]
	}
}

// marshalStep encodes a report as one JSON line (ending in '\n') with UTC timestamps.
// HTML escaping is off: the line is for the recorder and for jq, not for a browser. It
// cannot fail: AppendJSON replaces a raw field that is not JSON instead of refusing it.
func marshalStep(s report.Step) []byte {
	return append(s.AppendJSON(make([]byte, 0, 512+len(s.Args)+len(s.Result)+len(s.Error))), '\n')
}

func newProxyID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make proxyId: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
