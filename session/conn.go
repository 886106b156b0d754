// Package session is the one room for "the server went away: hold, dial again,
// re-handshake, settle" (SPEC §7). Its Conn is itself an upstream.Conn wrapping a
// Dialer: the relay, the interception and the replay dispatches see one upstream whose
// Read, once, returns an *upstream.ReplacedError, and carry on. Behind it, each server
// process, or remote session, is one generation: when one ends, the next is dialed by
// its policy (DefaultPolicy restarts a crashed stdio server: quick first retry, then a
// growing backoff, a crash loop given up for a cool-down; RenewPolicy replaces a
// remote session the server ended: at once, then a growing pause), the host's session
// is replayed on it (upstream.Setup: its initialize with an id of ours,
// notifications/initialized, the log level, the subscriptions, the listen streams)
// with the answers swallowed, and writes that waited for it go on, first what the old
// session refused unrun. See docs/revive.md (stdio) and docs/remote.md (remote) for
// the policies and why.
package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bir-dev/bir-proxy/internal/backoff"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/report"
	"github.com/bir-dev/bir-proxy/upstream"
)

// Policy is when and how often a dead server is started again. Zero fields take the
// defaults (DefaultPolicy()).
type Policy struct {
	// Backoff is the delay before the second start in a row of a server in trouble;
	// each further one doubles it, up to MaxBackoff. The first restart is at once.
	Backoff, MaxBackoff time.Duration
	// FastDeath: a server that came up but served no host request and died within
	// this long of its start is in trouble (it keeps dying within seconds).
	FastDeath time.Duration
	// GiveUpAfter starts in a row that died before answering anything — the server
	// never came up — put it down: every write then fails at once with why, until
	// CoolDown has passed and a write asks for one more start.
	GiveUpAfter int
	CoolDown    time.Duration
	// Wait bounds how long a write waits for a server being started.
	Wait time.Duration
	// Handshake bounds how long a new server may take to answer the replayed
	// initialize (and its own requests may go unanswered before they are forgotten).
	Handshake time.Duration
	// NoRestart is --no-revive: a server that dies is not started again. One that
	// had answered something ends the session (Read returns io.EOF); one that had
	// not ends it after telling the host why (an upstream.EndedError with
	// Options.Cause), since a server that dies at its start is a configuration to
	// fix and its stderr is shown to almost nobody.
	NoRestart bool
	// Renew is the policy of a remote server's sessions (RenewPolicy): a session
	// that ends is replaced at once, the next in a row that ended before serving
	// anything after Backoff doubling (no quick second try: a new session is cheap
	// to refuse), and the words are a session's.
	Renew bool
	// GiveUpTroubled, when set, also puts the server down after that many in a row
	// that came up and ended before serving anything (a server that expires each new
	// session at once).
	GiveUpTroubled int
}

// RenewPolicy is the policy of a remote server's sessions (docs/revive.md): a session
// the server ends (its 404, its event stream's end) is replaced by a new one at once;
// the n-th in a row that ended within 30 s before serving anything waits 100 ms
// doubling; after 5 of those, or 4 new sessions that could not be started, none for
// 30 s. A server that expired each new session at once drove ~1,000 initialize POSTs
// a second before.
func RenewPolicy() Policy {
	return Policy{
		Renew:          true,
		Backoff:        100 * time.Millisecond,
		MaxBackoff:     30 * time.Second,
		FastDeath:      30 * time.Second,
		GiveUpAfter:    4,
		GiveUpTroubled: 5,
		CoolDown:       30 * time.Second,
		Wait:           5 * time.Second,
		Handshake:      30 * time.Second,
	}
}

// DefaultPolicy is the policy of docs/revive.md.
func DefaultPolicy() Policy {
	return Policy{
		Backoff:     100 * time.Millisecond,
		MaxBackoff:  5 * time.Second,
		FastDeath:   10 * time.Second,
		GiveUpAfter: 4,
		CoolDown:    10 * time.Second,
		Wait:        5 * time.Second,
		Handshake:   10 * time.Second,
	}
}

func (p Policy) withDefaults() Policy {
	d := DefaultPolicy()
	if p.Backoff > 0 {
		d.Backoff = p.Backoff
	}
	if p.MaxBackoff > 0 {
		d.MaxBackoff = p.MaxBackoff
	}
	if p.FastDeath > 0 {
		d.FastDeath = p.FastDeath
	}
	if p.GiveUpAfter > 0 {
		d.GiveUpAfter = p.GiveUpAfter
	}
	if p.CoolDown > 0 {
		d.CoolDown = p.CoolDown
	}
	if p.Wait > 0 {
		d.Wait = p.Wait
	}
	if p.Handshake > 0 {
		d.Handshake = p.Handshake
	}
	d.NoRestart, d.Renew, d.GiveUpTroubled = p.NoRestart, p.Renew, p.GiveUpTroubled
	return d
}

// Options configure a Conn.
type Options struct {
	Dialer upstream.Dialer
	// Name is the server's name, in error answers and log lines.
	Name string
	// IDs makes the id of every request of ours; it must be the relay's
	// (relay.Options.IDs), so that an answer of ours arriving after we stopped
	// waiting for it is still never shown to the host, and is known to the relay as
	// one of ours. When nil, one is made with IDPrefix.
	IDs      *upstream.OwnIDs
	IDPrefix string
	Policy   Policy
	Logger   *slog.Logger
	// Revived, when set, is called after each revival with what the new server said
	// about itself (the recorder registers again with it), and again with its tool
	// names when a revival listed them. It runs on the reading goroutine and must not
	// wait.
	Revived func(report.ServerFacts)
	// Cause, when set, says why a server that died before answering anything went
	// away, for the host (Policy.NoRestart); it may wait, boundedly, for the exit
	// status. Without it the reason is the one of a revival's error answers.
	Cause func(upstream.Conn) string
}

// Conn is an upstream.Conn that outlives the servers behind it. It is an
// upstream.Batcher, Terminator, Exiter and Settler too.
type Conn struct {
	dialer  upstream.Dialer
	name    string
	ids     *upstream.OwnIDs
	policy  Policy
	log     *slog.Logger
	revived func(report.ServerFacts)
	cause   func(upstream.Conn) string
	setup   *upstream.Setup
	// copies is CopiesWrites: the first server's Conn keeps nothing written to it.
	copies bool
	// sessions: the first server's Conn names its session (SessionIdentifier).
	sessions bool
	// The relay's handler of long messages (SetStream), given to each server.
	streamAt int
	streamH  upstream.StreamHandler

	ctx     context.Context // ended by Close or Terminate: every wait of ours ends with it
	cancel  context.CancelFunc
	closing chan struct{}
	once    sync.Once

	// dialMu is held while a server is started, so Close can wait for a start under
	// way and then end the process it started.
	dialMu sync.Mutex

	// serving is cur while st is stUp, else nil: the writers' path, one atomic load.
	serving atomic.Pointer[gen]

	mu       sync.Mutex
	st       state
	cur      *gen                // the generation reads come from; nil between two
	last     atomic.Pointer[gen] // the last generation started (ExitCode, ExitDescriber); not under mu
	ready    chan struct{}       // closed when st leaves stStarting
	stateErr error               // why writes fail: stDown
	// held are the host's messages accepted while no server could take them (between
	// a server's death and the next one's handshake), for the next server.
	held    holdQueue
	retryAt time.Time     // stDown: when a write may ask for a start again
	kick    chan struct{} // a write asks the reader for a start (stDown after CoolDown)

	// Read side: touched by the reading goroutine only.
	rcur     *gen      // cur, as the reader has it (no lock per message)
	out      [][]byte  // messages of ours to return before reading again
	own      ownTable  // our requests to the current server awaiting answers
	neverUp  int       // starts in a row that died before answering anything
	troubled int       // deaths in a row of a server that came up but served nothing
	diedAt   time.Time // when the last generation was found dead
	lastHow  string    // how it ended: "exited with status 1"
	lastTail string    // its last stderr lines, quoted, or ""
	attempts int       // starts since it died
	revivals int
	mismatch error                                             // the last start negotiated another protocol version
	phases   struct{ obituary, dial, handshake time.Duration } // of the last revival, for the debug log
}

type state int

const (
	stUp       state = iota // cur serves; writes go to it
	stBetween               // Read returned a ReplacedError; writes are held until the next server is up
	stStarting              // a server is being started; writes wait (Policy.Wait)
	stDown                  // given up; writes fail at once, until retryAt
	stGone                  // Policy.NoRestart and the server died: writes fail at once, for good
	stClosed
)

// gen is one server process (or whatever the Dialer makes) and what is known of it.
type gen struct {
	conn  upstream.Conn
	caps  upstream.Capabilities // conn's
	batch upstream.Batcher
	lexed upstream.LexedReader // conn, when it lexes what it reads; else nil
	// copies says conn keeps nothing written to it past the write (CopiesWrites).
	copies  bool
	started time.Time
	// Read side.
	answered bool // it sent something: it came up
	served   bool // it answered a host request
	passed   bool // a message of it reached the relay
	took     bool // it accepted the replayed initialize
	announce bool // its revival is said once it answers something (no handshake to wait for)
	readyIn  time.Duration
	// wrote is set by writers: something reached it, so its end loses requests.
	wrote atomic.Bool
	// servedAny is served, for writers.
	servedAny atomic.Bool
	// streaming says its reader was given the relay's handler of long messages.
	streaming bool
}

// ErrClosed is what writes return once the session is ending.
var ErrClosed = errors.New("the session is ending")

// New returns a Conn whose first server is first, which the caller dialed with
// o.Dialer itself: a server that cannot be started at all (no such program) is not a
// crash to revive but a command to fix, and the caller says so before the session.
func New(first upstream.Conn, o Options) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		dialer:  o.Dialer,
		name:    o.Name,
		ids:     o.IDs,
		policy:  o.Policy.withDefaults(),
		log:     o.Logger,
		revived: o.Revived,
		cause:   o.Cause,
		setup:   upstream.NewSetup(),
		ctx:     ctx,
		cancel:  cancel,
		closing: make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	c.held.mu = &c.mu
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.ids == nil {
		c.ids = upstream.NewOwnIDs(o.IDPrefix)
	}
	g := newGen(first)
	c.copies = g.copies
	c.sessions = g.caps.SessionIdentifier != nil
	c.st = stUp
	c.cur, c.rcur = g, g
	c.last.Store(g)
	c.serving.Store(g)
	return c
}

func newGen(conn upstream.Conn) *gen {
	caps := conn.Capabilities()
	return &gen{conn: conn, caps: caps, batch: caps.Batcher, lexed: caps.LexedReader,
		copies: caps.CopiesWrites, started: time.Now()}
}

// Capabilities says what a revived connection can do: everything a stdio server's Conn
// can, whatever the server now behind it, since session.Conn does each itself (holding
// and settling are its own, for the servers it replaces). CopiesWrites is as the
// first server's Conn says: what is held for the next server is copied, and a later
// server whose Conn keeps what it is given gets a copy. A session id is the current
// server's, when the first server's Conn has one.
func (c *Conn) Capabilities() upstream.Capabilities {
	caps := upstream.Capabilities{
		Batcher: c, Terminator: c, Exiter: c, ExitDescriber: c, Settler: c, Holder: c,
		LexedWriter: c, LexedReader: c, Streamer: c, LineWriter: c,
		CopiesWrites: c.copies,
	}
	if c.sessions {
		caps.SessionIdentifier = sessionOf{c}
	}
	return caps
}

// sessionOf names the session of the server a Conn is serving with now.
type sessionOf struct{ c *Conn }

// SessionID is the current server's session id (upstream.SessionIdentifier).
func (s sessionOf) SessionID() string {
	if si := s.c.last.Load().caps.SessionIdentifier; si != nil {
		return si.SessionID()
	}
	return ""
}

// Setup is what the host set up on the session, as this Conn saw it.
func (c *Conn) Setup() *upstream.Setup { return c.setup }

func (c *Conn) dial() (*gen, error) {
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	conn, err := c.dialer.Dial(c.ctx)
	if err != nil {
		return nil, fmt.Errorf("starting server %s: %w", c.name, err)
	}
	g := newGen(conn)
	c.last.Store(g)
	return g, nil
}

// Read returns the next message from the server. When the server ends while the
// session goes on, Read returns an *upstream.ReplacedError saying why (if it may have
// left requests unanswered), and the next Read starts the next server and returns
// its messages. Read returns io.EOF only once the session is ending (Close, Terminate).
func (c *Conn) Read() ([]byte, error) { return c.read(nil) }

// ReadLexed is Read, leaving lx describing the message returned (upstream.LexedReader):
// a server's message is lexed by its Conn as it is checked (upstream.Process), one
// of revival's own is lexed here.
func (c *Conn) ReadLexed(lx *jsonlex.Line) ([]byte, error) { return c.read(lx) }

// read is Read, and ReadLexed when lx is set.
func (c *Conn) read(lx *jsonlex.Line) ([]byte, error) {
	// serving is set only in stUp, the usual case, where there is nothing to do
	// here: no lock per message then (a change of state after the look is the
	// same race as one after the lock is let go).
	if c.serving.Load() == nil {
		c.mu.Lock()
		if c.st == stBetween {
			c.startingLocked()
		}
		gone := c.st == stGone
		c.mu.Unlock()
		if gone {
			return nil, io.EOF
		}
	}
	for {
		if len(c.out) > 0 {
			msg := c.out[0]
			c.out[0] = nil
			c.out = c.out[1:]
			if lx != nil {
				lx.Lex(msg)
			}
			return msg, nil
		}
		g := c.rcur
		if g == nil {
			if err := c.restart(); err != nil {
				return nil, err
			}
			continue
		}
		g.streamTo(c)
		var msg []byte
		var err error
		if g.lexed != nil && lx != nil {
			msg, err = g.lexed.ReadLexed(lx)
		} else if msg, err = g.conn.Read(); err == nil && lx != nil {
			lx.Lex(msg)
		}
		if err == nil {
			if !g.answered {
				g.answered = true
				if g.announce {
					c.announce(g)
				}
			}
			if c.own.waiting() && c.own.take(msg) {
				continue
			}
			c.setup.FromServer(msg)
			if ls := c.setup.Listens(); ls.Open() {
				// A stream sent to this server again: its acknowledgment is kept back
				// when the host has it already, and the host is told what it may have
				// missed (listen.go).
				pass, notes := ls.FromServer(msg, lx)
				c.out = append(c.out, notes...)
				if !pass {
					continue
				}
			}
			if !g.served && isResponse(msg) {
				g.served = true
				g.servedAny.Store(true)
			}
			g.passed = true
			return msg, nil
		}
		if ue, ok := upstream.IsUnanswered(err); ok {
			return nil, ue // requests of a server that stays: the relay answers them
		}
		if c.ctx.Err() != nil {
			return nil, io.EOF // the session is ending: the server was stopped, not lost
		}
		if c.policy.NoRestart {
			return nil, c.endForGood(g, err)
		}
		if re := c.died(g, err); re != nil {
			return nil, re
		}
	}
}

// endForGood settles the death of g under Policy.NoRestart: writes fail from now on,
// and Read says how the session ends: io.EOF after a server that had answered, an
// upstream.EndedError with why after one that had not.
func (c *Conn) endForGood(g *gen, readErr error) error {
	var reason string
	if c.cause != nil && !g.served {
		reason = c.cause(g.conn)
	} else {
		how, tail := g.obituary(readErr)
		reason = fmt.Sprintf("server %s %s%s", c.name, how, stderrNote(tail))
	}
	c.rcur = nil
	c.mu.Lock()
	if c.st != stClosed {
		if c.st == stStarting {
			close(c.ready)
		}
		c.st = stGone
		c.stateErr = errors.New(reason)
		c.serving.Store(nil)
	}
	c.cur = nil
	c.mu.Unlock()
	g.stop()
	if g.served {
		return io.EOF
	}
	c.log.Warn("the server went away before answering; the host's requests get the reason", "reason", reason)
	return &upstream.EndedError{Reason: reason}
}

// setCur makes g the generation reads come from (nil: none). Reader only.
func (c *Conn) setCur(g *gen) {
	c.rcur = g
	c.mu.Lock()
	c.cur = g
	c.mu.Unlock()
}

// startingLocked enters stStarting: writes from now on wait for the next server.
func (c *Conn) startingLocked() {
	if c.st == stStarting || c.st == stClosed {
		return
	}
	c.serving.Store(nil)
	c.st = stStarting
	c.stateErr = nil
	c.ready = make(chan struct{})
}

// leaveStartingLocked ends stStarting for st, waking the writers that wait.
func (c *Conn) leaveStartingLocked(st state) {
	if c.st == stClosed {
		return
	}
	wasStarting := c.st == stStarting
	c.st = st
	if st == stUp {
		c.serving.Store(c.cur)
	} else {
		c.serving.Store(nil)
	}
	if wasStarting {
		close(c.ready)
	}
}

// died settles the end of generation g. It returns the ReplacedError for the relay
// when the relay may hold requests, or answers, of g's (it wrote to g, or g's
// messages reached it); a server that ended before anything crossed is replaced
// without the relay knowing.
func (c *Conn) died(g *gen, readErr error) *upstream.ReplacedError {
	c.diedAt = time.Now()
	c.attempts = 0
	c.lastHow, c.lastTail = g.obituary(readErr)
	c.phases.obituary = time.Since(c.diedAt)
	uptime := c.diedAt.Sub(g.started)
	switch {
	case !g.answered:
		c.neverUp++
	case g.served || uptime >= c.policy.FastDeath:
		c.neverUp, c.troubled = 0, 0
	default:
		c.neverUp = 0
		c.troubled++
	}
	c.setup.Lost()
	c.own.forget()
	lost := g.wrote.Load() || g.passed
	var refused [][]byte
	if se, ok := readErr.(*upstream.SessionEndedError); ok {
		refused = se.Msgs
	}
	relisten := c.setup.Listens().Relisten()
	reason := fmt.Sprintf("server %s %s%s", c.name, c.lastHow, stderrNote(c.lastTail))
	c.rcur = nil
	if len(refused) > 0 {
		// Put first: not while a flush is writing the oldest, which it then drops.
		c.held.flushMu.Lock()
	}
	c.mu.Lock()
	c.cur = nil
	if lost && c.st != stClosed {
		if c.st == stStarting {
			close(c.ready) // a flush to g was under way: its waiting writers now hold
		}
		c.serving.Store(nil)
		c.st = stBetween
		c.stateErr = nil
	} else {
		c.startingLocked()
	}
	if c.st != stClosed {
		// What the ended session refused unrun goes first, before what was written
		// after its end; then the listen streams still open.
		c.held.refusedLocked(refused, func(m []byte) bool { return ownRequest(c.ids, m) })
		c.held.relistenLocked(relisten)
	}
	c.mu.Unlock()
	if len(refused) > 0 {
		c.held.flushMu.Unlock()
	}
	// Whatever it left running goes, at once: it is dead, or broken (it closed its
	// stdout and lives on).
	g.stop()
	if !lost {
		return nil
	}
	again := "; restarting it"
	if c.policy.Renew {
		again = "; starting a new session"
	}
	if c.neverUp > 0 && !c.policy.NoRestart {
		// In trouble: the host is told how far from giving up it is.
		return &upstream.ReplacedError{Reason: fmt.Sprintf("%s%s (attempt %d of %d)", reason, again, c.neverUp+1, c.policy.GiveUpAfter)}
	}
	return &upstream.ReplacedError{Reason: reason + again}
}

// obituary says how g ended: its exit status or signal and its last stderr lines, when
// it is a process; otherwise the read error.
func (g *gen) obituary(readErr error) (how, tail string) {
	if se, ok := readErr.(*upstream.SessionEndedError); ok {
		return se.Reason, "" // "at URL: the server's session expired (HTTP 404)"
	}
	d := g.caps.ExitDescriber
	if d == nil {
		if readErr == nil || errors.Is(readErr, io.EOF) {
			return "closed the connection", ""
		}
		return "went away: " + readErr.Error(), ""
	}
	// The process may hold its stdout open a moment after the last line (or a child of
	// it may): its exit is what matters.
	exited := make(chan string, 1)
	go func() { exited <- d.ExitReason() }()
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case how = <-exited:
	case <-t.C:
		how = "closed its stdout"
	}
	return how, upstream.StderrWords(d.StderrTail(60), 4)
}

// Settled is the relay's word that it has settled what the dead server left behind:
// writes from now on wait for the next one (upstream.Settler).
func (c *Conn) Settled() {
	c.mu.Lock()
	if c.st == stBetween {
		c.startingLocked()
	}
	c.mu.Unlock()
}

// restart starts servers until one is up, by the policy, and returns nil once it is;
// it returns io.EOF when the session ends first, and an UndeliveredError when held
// messages are due to be answered (it is called again after). It runs on the reading goroutine,
// with no current generation.
func (c *Conn) restart() error {
	for {
		giveUp := c.neverUp >= c.policy.GiveUpAfter || c.mismatch != nil || c.policy.tooTroubled(c.troubled)
		// What the host sent since the death waits Policy.Wait at most, as a write
		// does, and not at all for a server that is given up on.
		if msgs := c.held.expire(giveUp, c.policy.Wait); msgs != nil {
			c.setup.Listens().Undelivered(msgs) // answered with an error: no longer open
			reason := fmt.Sprintf("server %s %s and was not back within %v", c.name, c.lastHow, c.policy.Wait)
			if c.policy.tooTroubled(c.troubled) {
				reason = c.policy.troubledReason(c.name, c.lastHow, c.troubled)
			}
			return &upstream.UndeliveredError{Msgs: msgs, Reason: reason}
		}
		if giveUp {
			if err := c.down(); err != nil {
				return err
			}
		} else if d := c.policy.delay(max(c.neverUp, c.troubled)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.held.due(c.policy.Wait):
				t.Stop()
				continue
			case <-c.ctx.Done():
				t.Stop()
				return io.EOF
			}
		}
		c.mismatch = nil
		c.attempts++
		dialAt := time.Now()
		g, err := c.dial()
		c.phases.dial = time.Since(dialAt)
		if err != nil {
			if c.ctx.Err() != nil {
				return io.EOF
			}
			c.neverUp++
			c.lastHow, c.lastTail = "could not be started again: "+err.Error(), ""
			c.log.Warn("could not start the server again", "err", err, "attempt", c.attempts)
			continue
		}
		c.setCur(g)
		handAt := time.Now()
		err = c.handshake(g)
		c.phases.handshake = time.Since(handAt)
		if err != nil {
			if c.ctx.Err() != nil {
				return io.EOF
			}
			var vm *upstream.VersionMismatchError
			if errors.As(err, &vm) {
				c.mismatch = err
				c.log.Error("the revived server speaks another protocol version than the host negotiated; requests get an error until the host reconnects",
					"negotiated", vm.Negotiated, "offered", vm.Offered)
				g.stop()
				c.setCur(nil)
				continue
			}
			// It died, refused, or did not answer: a start that did not take the
			// session back counts toward giving up, like one that never came up.
			c.out = c.out[:0]
			if g.took {
				c.troubled++
			} else {
				c.neverUp++
			}
			if !errors.Is(err, errGenDied) {
				c.lastHow, c.lastTail = err.Error(), ""
				c.log.Warn("the revived server did not take the session back; stopping it", "err", err)
				g.stop()
			}
			c.setCur(nil)
			continue
		}
		c.up(g)
		return nil
	}
}

// delay is how long to wait before the n-th start in a row of a server in trouble
// (n is the larger of the starts that never came up and the deaths of one that served
// nothing): none after a server that served (or lived) and died, nor for the first
// retry of one in trouble (but under Renew); then Backoff, doubling, up to MaxBackoff.
func (p Policy) delay(n int) time.Duration {
	quick := 1
	if p.Renew {
		quick = 0
	}
	if n <= quick {
		return 0
	}
	return backoff.Policy{Base: p.Backoff, Cap: p.MaxBackoff, Jitter: backoff.None}.Step(n - 1 - quick)
}

// tooTroubled reports whether troubled servers in a row, that came up and ended before
// serving anything, put the server down (GiveUpTroubled).
func (p Policy) tooTroubled(troubled int) bool {
	return p.GiveUpTroubled > 0 && troubled >= p.GiveUpTroubled
}

// troubledReason is why server name is down when tooTroubled: the last ended how.
func (p Policy) troubledReason(name, how string, troubled int) string {
	what := "servers started"
	if p.Renew {
		what = "new sessions"
	}
	return fmt.Sprintf("server %s %s, and so did each of the last %d %s at once", name, how, troubled, what)
}

// down gives up for a cool-down: writes fail at once with why, and the first write
// after the cool-down asks for one more start (down then returns nil). It returns
// io.EOF when the session ends first.
func (c *Conn) down() error {
	var msg string
	switch {
	case c.mismatch != nil:
		msg = fmt.Sprintf("server %s is down: it came back, but %v; reconnect to it (restart the MCP server in the host)", c.name, c.mismatch)
	case c.policy.tooTroubled(c.troubled):
		msg = c.policy.troubledReason(c.name, c.lastHow, c.troubled)
		c.log.Warn("giving up starting new sessions for a while: each ended at once",
			"ended", c.lastHow, "in_a_row", c.troubled, "retry_after", c.policy.CoolDown)
		c.troubled = 0 // after the cool-down, one more round
	default:
		msg = fmt.Sprintf("server %s is down: it %s before answering anything, %d starts in a row%s", c.name, c.lastHow, c.neverUp, stderrNote(c.lastTail))
		c.log.Warn("the server keeps dying before it answers anything; giving up for a while",
			"ended", c.lastHow, "stderr", c.lastTail, "starts", c.neverUp, "retry_after", c.policy.CoolDown)
	}
	retryAt := time.Now().Add(c.policy.CoolDown)
	c.mu.Lock()
	c.retryAt = retryAt
	c.stateErr = errors.New(msg + "; a request after " + retryAt.Format("15:04:05") + " tries to start it again")
	c.leaveStartingLocked(stDown)
	c.mu.Unlock()
	select {
	case <-c.kick:
		return nil
	case <-c.ctx.Done():
		return io.EOF
	}
}

// errGenDied says a new server ended during its handshake.
var errGenDied = errors.New("the server ended before it took the session back")

// handshake replays the host's session on g (upstream.Setup.Replay, the one
// re-handshake, which a re-initialized HTTP session uses too): its initialize,
// waiting for the answer, which must negotiate the same version; then
// notifications/initialized and the restores, and a tools/list of ours when the host
// may be told the list changed, whose answers Read swallows (takeOwn).
func (c *Conn) handshake(g *gen) error {
	ia, err := c.setup.Replay(c.ctx, genPeer{c, g}, c.ids, upstream.ReplayHooks{
		Log: c.log,
		Listed: func(tools []byte, changed bool) {
			if changed {
				c.out = append(c.out, []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
				c.log.Info("the revived server's tools differ from those the host listed; telling the host")
			}
			if c.revived != nil && tools != nil {
				c.revived(report.ServerFacts{Tools: upstream.ToolNames(tools)})
			}
		},
	})
	if ia.Done {
		// It accepted the replayed initialize, whether or not anything followed
		// (a host that sent no notifications/initialized has nothing to restore).
		g.took = true
	}
	if err != nil {
		return err
	}
	if ia.Done && c.revived != nil {
		c.revived(report.ServerFacts{ServerInfo: ia.Init.ServerInfo, ProtocolVersion: ia.Init.ProtocolVersion})
	}
	return nil
}

// maxEarlyBytes bounds what a new server may say before it answers the replayed
// initialize that is kept for the host (256 messages at most, too): a hostile server
// could otherwise make it 256 times --max-message before the handshake times out.
const maxEarlyBytes = 16 << 20

// genPeer is a new generation's server as the re-handshake reaches it
// (upstream.RehandshakePeer). It runs on the reader's goroutine.
type genPeer struct {
	c *Conn
	g *gen
}

// Call writes req and reads until its answer. A server that never answers must not
// hold the session: it is stopped after Policy.Handshake, its Read ends, and the
// start counts as one that did not come up. What it says before answering (a log
// notification) goes to the host once the session is back, in order.
func (p genPeer) Call(_ context.Context, req, id []byte) ([]byte, error) {
	c, g := p.c, p.g
	if err := g.conn.Write(req); err != nil {
		return nil, p.ended(fmt.Errorf("replaying initialize: %w", err))
	}
	limit := c.policy.Handshake
	if d, ok := c.held.dueIn(c.policy.Wait); ok && d < limit && c.policy.Renew {
		// The host's requests held for this session are due before the handshake
		// bound: a new session that does not answer its initialize, or a restore,
		// held them 30 s (Handshake), not the 5 s a request is held (Wait). It is
		// given up on when they are due, and they are answered.
		limit = d
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(limit, func() {
		timedOut.Store(true)
		g.stop()
	})
	defer timer.Stop()
	want := jsonlex.IDKey(id)
	outBytes := 0 // of what this server said before answering, kept for the host
	for {
		msg, err := g.conn.Read()
		if ue, ok := upstream.IsUnanswered(err); ok {
			// A remote session's request failed (its server unreachable, a 5xx):
			// the start did not take.
			return nil, errors.New(ue.Reason)
		}
		if err != nil {
			if timedOut.Load() {
				f, _ := jsonlex.TopFields(req)
				return nil, fmt.Errorf("did not answer %s within %v", jsonlex.StringOf(f.Method), limit.Round(time.Millisecond))
			}
			return nil, p.ended(err)
		}
		g.answered = true
		// Copied when kept: the server's Conn may lend its messages only until its
		// next Read (upstream.Command.Slab).
		if f, ok := jsonlex.TopFields(msg); ok && f.IsResponse() && jsonlex.IDKey(f.ID) == want {
			return bytes.Clone(msg), nil
		}
		if c.own.take(msg) {
			continue
		}
		if len(c.out) < 256 && outBytes+len(msg) <= maxEarlyBytes {
			outBytes += len(msg)
			c.out = append(c.out, bytes.Clone(msg))
		}
	}
}

// Send writes msg; an answer to it is taken by Read (takeOwn) and handed to
// answered, for at most Policy.Handshake (under Renew, waited for: Call). Send is only
// called once the server has accepted the replayed initialize: it took the session
// back.
func (p genPeer) Send(ctx context.Context, msg, id []byte, answered func([]byte)) error {
	c, g := p.c, p.g
	g.took = true
	if id != nil && c.policy.Renew {
		// A remote session's requests are not ordered as a pipe's are (each POST on
		// its own): each restore is answered before the next goes, and before the
		// host's held messages, or a call could overtake the log level it was set
		// up with.
		ans, err := p.Call(ctx, msg, id)
		if err != nil {
			return err
		}
		if answered != nil {
			answered(ans)
		}
		return nil
	}
	c.own.until = time.Now().Add(c.policy.Handshake)
	if id != nil {
		c.own.add(id, ownReq{answered: answered})
	}
	if err := g.conn.Write(msg); err != nil {
		return p.ended(fmt.Errorf("restoring the session: %w", err))
	}
	return nil
}

// ended is the end of p's generation during its handshake: it says how.
func (p genPeer) ended(err error) error {
	c, g := p.c, p.g
	if c.ctx.Err() != nil {
		return err
	}
	c.lastHow, c.lastTail = g.obituary(err)
	g.conn.Close()
	return errGenDied
}

// stderrNote is a server's last stderr lines tail for an error answer, or "".
func stderrNote(tail string) string {
	if tail == "" {
		return ""
	}
	return " (" + tail + ")"
}

// stop ends a generation at once.
func (g *gen) stop() {
	if t := g.caps.Terminator; t != nil {
		t.Terminate()
		return
	}
	g.conn.Close()
}

// up makes g the server writes go to. A server that took the session back is
// revived, and said so; one with no handshake to take is said revived once it
// answers something, so that a crash loop does not print a revival per start.
func (c *Conn) up(g *gen) {
	g.readyIn = time.Since(c.diedAt)
	if len(c.out) > 0 {
		g.passed = true // what it said before its handshake goes to the relay first
	}
	c.rcur = g
	c.mu.Lock()
	c.cur = g
	if len(c.held.msgs) > 0 {
		// Writes keep waiting until what was held has gone first, in order. Written
		// beside the reader: a server that answers as it reads would otherwise fill
		// its stdout while we fill its stdin, and neither would move.
		go c.flush(g)
	} else {
		c.leaveStartingLocked(stUp)
	}
	c.mu.Unlock()
	if g.took {
		c.announce(g)
	} else {
		g.announce = true
	}
}

// announce says, in one line, that the server is back, and tells the recorder.
func (c *Conn) announce(g *gen) {
	g.announce = false
	c.revivals++
	if c.revived != nil && !g.took {
		c.revived(report.ServerFacts{}) // register again: the recorder learns the proxy is back
	}
	what := "revived the server"
	if c.policy.Renew {
		what = "started a new session with the server"
	}
	c.log.Info(what, "ended", c.lastHow, "attempt", c.attempts, "took", g.readyIn.Round(time.Millisecond),
		"revivals", c.revivals, "era", c.setup.Era().String())
	// For the soak test and for anyone chasing a leak: revivals must not grow the proxy.
	c.log.Debug("after the revival", "goroutines", runtime.NumGoroutine(),
		"obituary", c.phases.obituary, "dial", c.phases.dial, "handshake", c.phases.handshake)
}

func isResponse(msg []byte) bool {
	served := false
	jsonlex.EachRPC(msg, func(_ []byte, f jsonlex.Fields) {
		if f.IsResponse() {
			served = true
		}
	})
	return served
}

// Write sends one message to the current server. While a server is being started it
// waits for it (Policy.Wait at most); while the server is down, or between its end
// and the relay settling what it left (see upstream.ReplacedError), it fails at once
// with why. It never waits for an answer.
func (c *Conn) Write(msg []byte) error { return c.write(msg, nil, false) }

// Hold is Write, except that the message may wait for the next Write (upstream.Batcher).
func (c *Conn) Hold(msg []byte) error { return c.write(msg, nil, true) }

// Flush writes out what Hold held for the current server (upstream.Batcher). What
// is held for the next server (upstream.Holder) goes to it when it is up.
func (c *Conn) Flush() error {
	if g := c.serving.Load(); g != nil && g.batch != nil {
		return g.batch.Flush()
	}
	return nil
}

// WriteLexed is Write (Hold when hold is set) of a message the relay has already lexed
// into lx (upstream.LexedWriter): the look at the handshake reads the relay's lex rather
// than lexing the message once more on the host's path. lx is not kept.
func (c *Conn) WriteLexed(msg []byte, lx *jsonlex.Line, hold bool) error {
	return c.write(msg, lx, hold)
}

func (c *Conn) write(msg []byte, lx *jsonlex.Line, hold bool) error {
	for tries := 0; ; tries++ {
		err := c.writeOnce(msg, lx, hold)
		if err != errServerUp || tries > 0 {
			return err
		}
		// The server died and the next one came up before this could be held (its
		// death lost nothing of the relay's, so nothing waited): it goes to that one.
	}
}

// errServerUp is hold's word that a server is up again: the write goes to it.
var errServerUp = errors.New("a server is up")

func (c *Conn) writeOnce(msg []byte, lx *jsonlex.Line, hold bool) error {
	g := c.serving.Load()
	if g == nil {
		var err error
		if g, err = c.writable(); err == errHold {
			return c.holdAfter(nil, msg)
		} else if err != nil {
			return err
		}
	}
	// Before the write: the server can answer before Write returns.
	if lx != nil {
		c.setup.FromHostLexed(msg, lx)
	} else {
		c.setup.FromHost(msg)
	}
	if !g.wrote.Load() {
		g.wrote.Store(true)
	}
	if c.copies && !g.copies {
		msg = bytes.Clone(msg) // the writer lent it (CopiesWrites)
	}
	var err error
	if hold && g.batch != nil {
		err = g.batch.Hold(msg)
	} else {
		err = g.conn.Write(msg)
	}
	if err != nil {
		if gone(g, err) {
			if c.policy.NoRestart {
				if !g.servedAny.Load() {
					// The reader answers it with why the server died (EndedError):
					// it is in flight, with the others.
					return nil
				}
				return err // it says how the server ended (upstream.Process.Write)
			}
			// The server died and its reader has not said so yet. It never got this
			// message: the next server does (its reader settles the rest).
			return c.holdAfter(g, msg)
		}
		return err
	}
	return nil
}

// gone reports whether a write to g failed because its server is gone: it exited, or
// closed the pipe we write to.
func gone(g *gen, err error) bool {
	if d := g.caps.ExitDescriber; d != nil && d.Exited() {
		return true
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe)
}

// errHold is writable's word that the write is to be held for the next server.
var errHold = errors.New("hold for the next server")

// Bounds on what is held for the next server: a host that goes on sending while its
// server is down must not grow the proxy without end. Past them a write fails, and
// its writer answers it.
const (
	maxHeld      = 4096
	maxHeldBytes = 64 << 20
)

// holdAfter keeps msg for the next server (upstream.Holder); dead is the server a
// write of it just failed on, if any.
func (c *Conn) holdAfter(dead *gen, msg []byte) error {
	if ownRequest(c.ids, msg) {
		// A request of the proxy's own (a replay dispatch) is not held: when its
		// server went away the relay retired it, and its caller was told; sent later it
		// would run a tool whose step says it was lost, and an answer undelivered would
		// reach the host with an id the host never used.
		return fmt.Errorf("server %s is being restarted", c.name)
	}
	batched := dead != nil && c.setup.Listens().Open() && isBatch(msg)
	cancel := bytes.Contains(msg, []byte("notifications/cancelled"))
	if batched || cancel {
		// takeBatchLocked replaces a held message: not the one a flush is writing.
		c.held.flushMu.Lock()
		defer c.held.flushMu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.st == stClosed:
		return ErrClosed
	case dead != nil && c.st == stUp && c.cur != dead:
		// The next server is up already, and nothing waits to go first: this goes to
		// it, not into a hold that nothing would flush.
		return errServerUp
	case cancel && c.held.cancelLocked(msg):
		// The host cancelled a request held for the next server: neither goes.
		return nil
	case dead != nil && c.setup.Listens().Open() && c.held.hasLocked(msg):
		// A listen request written as its server died, which the death holds already
		// (relistenLocked): the next server gets it once.
		return nil
	case batched && c.held.takeBatchLocked(msg):
		// A batch with a listen request the death holds alone: held in its place.
		return nil
	case len(c.held.msgs) >= maxHeld || c.held.bytes+len(msg) > maxHeldBytes:
		return fmt.Errorf("server %s is being restarted, and %d messages (%d bytes) already wait for it", c.name, len(c.held.msgs), c.held.bytes)
	}
	// A copy: the writer may have lent msg only for its write (CopiesWrites).
	c.held.pushLocked(bytes.Clone(msg))
	return nil
}

// Held returns the messages held for the next server (upstream.Holder).
func (c *Conn) Held() [][]byte { return c.held.snapshot() }

// flush writes the held messages to g, the server just up, oldest first, then lets
// the writers waiting for it go on. It stops, leaving the rest held, when g is no
// longer current (it died: its reader settles that) or the session ends.
func (c *Conn) flush(g *gen) {
	for {
		c.held.flushMu.Lock()
		c.mu.Lock()
		if c.cur != g || c.st != stStarting {
			c.mu.Unlock()
			c.held.flushMu.Unlock()
			return
		}
		if len(c.held.msgs) == 0 {
			c.held.bytes = 0
			c.leaveStartingLocked(stUp)
			c.mu.Unlock()
			c.held.flushMu.Unlock()
			return
		}
		msg := c.held.msgs[0]
		c.mu.Unlock()
		c.setup.FromHost(msg)
		g.wrote.Store(true)
		err := g.conn.Write(msg)
		if err == nil {
			c.mu.Lock()
			c.held.popLocked()
			c.mu.Unlock()
		}
		c.held.flushMu.Unlock()
		if err != nil {
			if !gone(g, err) {
				c.log.Warn("could not write a held message to the new server", "err", err)
			}
			return // g's reader finds it dead; what is left waits for the next one
		}
	}
}

// writable returns the generation a write goes to, waiting for one being started.
func (c *Conn) writable() (*gen, error) {
	var timeout <-chan time.Time
	for {
		c.mu.Lock()
		switch c.st {
		case stUp:
			g := c.cur
			c.mu.Unlock()
			return g, nil
		case stBetween:
			c.mu.Unlock()
			return nil, errHold
		case stStarting:
			if len(c.held.msgs) > 0 {
				// Behind what is held already, in order.
				c.mu.Unlock()
				return nil, errHold
			}
		case stClosed:
			c.mu.Unlock()
			return nil, ErrClosed
		case stGone:
			err := c.stateErr
			c.mu.Unlock()
			return nil, err
		case stDown:
			if time.Now().Before(c.retryAt) {
				err := c.stateErr
				c.mu.Unlock()
				return nil, err
			}
			// The cool-down is over: this write asks for one more start, and waits for it.
			c.startingLocked()
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
		ready := c.ready
		c.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(c.policy.Wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ready:
		case <-timeout:
			c.mu.Lock()
			err := c.stateErr
			c.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("server %s is being restarted (it %s) and was not back within %v", c.name, c.howNow(), c.policy.Wait)
			}
			return nil, err
		case <-c.closing:
			return nil, ErrClosed
		}
	}
}

// howNow is how the last server ended, for a writer (lastHow is the reader's).
func (c *Conn) howNow() string {
	if g := c.last.Load(); g != nil {
		if d := g.caps.ExitDescriber; d != nil && d.Exited() {
			return d.ExitReason()
		}
	}
	return "went away"
}

// Buffered reports whether Read will return a message without waiting. It is called
// on the reading goroutine. While an answer of ours may be next it says no: Read would
// swallow it and wait, with the relay holding a message back for it.
func (c *Conn) Buffered() bool {
	if len(c.out) > 0 {
		return true
	}
	if c.own.waiting() {
		return false
	}
	g := c.rcur
	return g != nil && g.batch != nil && g.batch.Buffered()
}

// Close ends the session the gentle way: no server is started again, and the current
// one is closed (its stdin, then the stop sequence). It returns once it has exited.
func (c *Conn) Close() error {
	return c.end(func(g *gen) { g.conn.Close() })
}

// Terminate ends the session at once (SIGINT, SIGTERM to the proxy): no server is
// started again, and the current one is told to stop now.
func (c *Conn) Terminate() {
	_ = c.end((*gen).stop)
}

func (c *Conn) end(stop func(*gen)) error {
	c.once.Do(func() {
		c.cancel()
		close(c.closing)
	})
	c.mu.Lock()
	if c.st == stStarting {
		close(c.ready)
	}
	c.st = stClosed
	c.serving.Store(nil)
	c.mu.Unlock()
	// A start under way finishes first; after it none begins (ctx is done), so the
	// process ended here is the last one.
	c.dialMu.Lock()
	c.mu.Lock()
	g := c.cur
	if g == nil {
		g = c.last.Load()
	}
	c.mu.Unlock()
	c.dialMu.Unlock()
	if g != nil {
		stop(g)
	}
	return nil
}

// ExitCode waits for the last server to have exited and returns its status
// (upstream.Exiter); 0 when the servers are not processes.
func (c *Conn) ExitCode() int {
	if e := c.last.Load().caps.Exiter; e != nil {
		return e.ExitCode()
	}
	return 0
}

// ExitReason is how the last server ended (upstream.ExitDescriber); "" when the
// servers are not processes.
func (c *Conn) ExitReason() string {
	if d := c.last.Load().caps.ExitDescriber; d != nil {
		return d.ExitReason()
	}
	return ""
}

// StderrTail is the last server's last n stderr lines (upstream.ExitDescriber).
func (c *Conn) StderrTail(n int) []string {
	if d := c.last.Load().caps.ExitDescriber; d != nil {
		return d.StderrTail(n)
	}
	return nil
}

// Exited reports whether the last server has exited (upstream.ExitDescriber).
func (c *Conn) Exited() bool {
	d := c.last.Load().caps.ExitDescriber
	return d != nil && d.Exited()
}
