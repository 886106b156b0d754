package verify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/upstream"
)

// session is verify's client side of one server: its own requests over an
// upstream.Conn, answers routed to them by id (a goroutine reads), the server's own
// requests answered (ping) or refused.
type session struct {
	conn   upstream.Conn
	prefix string // ids are prefix + n: "bir:verify:<pid>:n", the replay executor's namespace
	n      atomic.Int64
	meta   []byte // the stateless era's params._meta, nil in the session era

	wmu     sync.Mutex     // one write at a time
	writing atomic.Int32   // requests being written (send)
	replies sync.WaitGroup // answers to the server's own requests being written
	slots   chan struct{}  // bounds those writes: a server not reading gets no more

	mu      sync.Mutex
	waiting map[string]chan answer
	dead    chan struct{} // closed when the server is gone
	why     string        // why, once dead
	done    chan struct{} // the reader returned
}

type answer struct {
	msg    []byte // the whole response
	result []byte
	err    []byte
	lost   string // the answer will not come: why
}

func newSession(conn upstream.Conn, prefix string) *session {
	s := &session{conn: conn, prefix: prefix, waiting: map[string]chan answer{},
		dead: make(chan struct{}), done: make(chan struct{}), slots: make(chan struct{}, maxAsync)}
	go s.read()
	return s
}

func (s *session) newID() []byte {
	return jsonlex.AppendString(nil, s.prefix+strconv.FormatInt(s.n.Add(1), 10))
}

func (s *session) read() {
	defer close(s.done)
	lr := s.conn.Capabilities().LexedReader
	lexed := lr != nil
	var lx jsonlex.Line
	for {
		var msg []byte
		var err error
		if lexed {
			msg, err = lr.ReadLexed(&lx)
		} else {
			msg, err = s.conn.Read()
		}
		if err != nil {
			if rep, ok := upstream.IsReplaced(err); ok {
				// A remote session that expired, re-established by the Conn: what was
				// in flight is lost with it; what follows goes to the new session.
				s.failWaiting("the server's session was replaced: " + rep.Reason)
				if st := s.conn.Capabilities().Settler; st != nil {
					st.Settled()
				}
				continue
			}
			s.die(s.describe(err))
			return
		}
		if lexed {
			// Lexed as the line was checked: no pass of verify's own to find the
			// messages and their members.
			for _, o := range lx.Objs {
				if o.Recheck {
					s.handle(msg[o.Start:o.End])
					continue
				}
				s.handleFields(msg[o.Start:o.End], jsonlex.Fields{Method: span(msg, o.Method), ID: span(msg, o.ID),
					Params: span(msg, o.Params), Result: span(msg, o.Result), Error: span(msg, o.Error)})
			}
			continue
		}
		jsonlex.EachMessage(msg, func(m []byte) { s.handle(m) })
	}
}

// span is the bytes of a lexed member, nil for an absent one (a zero Span).
func span(msg []byte, sp jsonlex.Span) []byte {
	if sp == (jsonlex.Span{}) {
		return nil
	}
	return msg[sp.Start:sp.End]
}

// describe says how the server went: its exit and last stderr lines for a process.
func (s *session) describe(err error) string {
	why := "the connection ended"
	if !errors.Is(err, io.EOF) {
		why = err.Error()
	}
	if d := s.conn.Capabilities().ExitDescriber; d != nil {
		how := make(chan string, 1)
		go func() { how <- d.ExitReason() }()
		select {
		case h := <-how:
			why = "the server " + h
		case <-time.After(time.Second):
			why = "the server closed its output"
		}
		if tail := d.StderrTail(6); len(tail) > 0 {
			why += "; its last stderr lines: " + strings.Join(tail, " | ")
		}
	}
	return why
}

func (s *session) handle(m []byte) {
	f, ok := jsonlex.TopFields(m)
	if !ok {
		return
	}
	s.handleFields(m, f)
}

func (s *session) handleFields(m []byte, f jsonlex.Fields) {
	switch {
	case f.IsResponse():
		s.mu.Lock()
		ch, ok := s.waiting[jsonlex.IDKey(f.ID)]
		delete(s.waiting, jsonlex.IDKey(f.ID))
		s.mu.Unlock()
		if ok {
			ch <- answer{msg: m, result: f.Result, err: f.Error}
		}
	case f.IsRequest():
		// The server asks the host something (sampling, elicitation, roots): verify
		// is no host. A ping is answered; the rest refused, so the server goes on.
		var reply []byte
		if jsonlex.StringOf(f.Method) == "ping" {
			reply = append(append([]byte(`{"jsonrpc":"2.0","id":`), f.ID...), `,"result":{}}`...)
		} else {
			reply = jsonlex.ErrorResponse(f.ID, -32601, "bir-proxy verify does not answer "+jsonlex.StringOf(f.Method))
		}
		s.writeAsync(reply)
	}
}

// maxAsync bounds the writes not waited for (answers to the server's requests,
// cancellations); past it a message is dropped: the server is not reading them.
const maxAsync = 64

// writeAsync writes msg off the caller's goroutine: a server that is not reading
// would stop the reader, or a request given up on. Bounded by maxAsync.
func (s *session) writeAsync(msg []byte) {
	select {
	case s.slots <- struct{}{}:
	default:
		return
	}
	s.replies.Add(1)
	go func() {
		defer func() { <-s.slots; s.replies.Done() }()
		s.write(msg)
	}()
}

func (s *session) die(why string) {
	s.mu.Lock()
	select {
	case <-s.dead:
	default:
		s.why = why
		close(s.dead)
	}
	s.mu.Unlock()
	s.failWaiting(why)
}

func (s *session) failWaiting(why string) {
	s.mu.Lock()
	w := s.waiting
	s.waiting = map[string]chan answer{}
	s.mu.Unlock()
	for _, ch := range w {
		ch <- answer{lost: why}
	}
}

// gone returns why the server is gone, or "".
func (s *session) gone() string {
	select {
	case <-s.dead:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.why
	default:
		return ""
	}
}

func (s *session) write(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.conn.Write(msg)
}

// errLost is a request whose answer will not come.
type errLost struct{ why string }

func (e *errLost) Error() string { return e.why }

// errExpired is a request whose timeout passed before its answer came.
var errExpired = errors.New("no answer in time")

// send writes msg, a request (or the handshake's notification) that is waited on,
// unless ctx is done. A server that stops reading its input (the pipe full, or a
// remote's queue) would hold the write, and so the call, past its timeout and past an
// interruption: whoever gives up on a request still being written gives up on the
// session (stall), which ends the write. A message half written cannot be taken back.
func (s *session) send(ctx context.Context, writing *atomic.Bool, msg []byte) error {
	s.writing.Add(1)
	defer s.writing.Add(-1)
	if writing != nil {
		defer writing.Store(false)
	}
	if err := ctx.Err(); err != nil {
		return err // after the count: watch sees the write, or the write sees ctx done
	}
	return s.write(msg)
}

// watch gives up on the session when ctx is done while a request is being written;
// stop it once ctx no longer bounds the writes.
func (s *session) watch(ctx context.Context, why string) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		if s.writing.Load() > 0 {
			s.stall(why + " while a request was still being written (the server is not reading its input)")
		}
	})
}

// stall gives up on a server that does not take what is written to it: every call
// waiting, and every later one, is not run; closing the connection ends the write.
func (s *session) stall(why string) {
	s.die(why)
	s.conn.Close()
}

// roundTrip sends msg, a request whose id is id, and waits for its answer, until ctx
// is done or timeout passes (0: never).
func (s *session) roundTrip(ctx context.Context, timeout time.Duration, id, msg []byte) (answer, error) {
	ch := make(chan answer, 1)
	key := jsonlex.IDKey(id)
	s.mu.Lock()
	select {
	case <-s.dead:
		s.mu.Unlock()
		return answer{}, &errLost{"not run: " + s.why}
	default:
	}
	s.waiting[key] = ch
	s.mu.Unlock()
	var expire chan struct{}
	var writing *atomic.Bool
	if timeout > 0 {
		// A timer, not a context.WithTimeout: a context per call, linked to ctx and
		// unlinked again, was 3% of verify's cost per call.
		expire, writing = make(chan struct{}), new(atomic.Bool)
		writing.Store(true)
		t := time.AfterFunc(timeout, func() {
			close(expire)
			if writing.Load() {
				s.stall("the server stopped reading its input: a request could not be written to it within " + timeout.String())
			}
		})
		defer t.Stop()
	}
	if err := s.send(ctx, writing, msg); err != nil {
		s.forget(key)
		if why := s.gone(); why != "" {
			return answer{}, &errLost{why}
		}
		if ctx.Err() != nil {
			return answer{}, ctx.Err()
		}
		return answer{}, &errLost{"sending the request: " + err.Error()}
	}
	select {
	case a := <-ch:
		if a.lost != "" {
			return a, &errLost{a.lost}
		}
		return a, nil
	case <-ctx.Done():
		s.cancel(key, id)
		return answer{}, ctx.Err()
	case <-expire:
		s.cancel(key, id)
		return answer{}, errExpired
	}
}

// cancel forgets a request given up on and tells the server, so that it stops
// working on it.
func (s *session) cancel(key string, id []byte) {
	s.forget(key)
	s.writeAsync([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(id) + `,"reason":"bir-proxy verify gave up on it"}}`))
}

func (s *session) forget(key string) {
	s.mu.Lock()
	delete(s.waiting, key)
	s.mu.Unlock()
}

// request sends method with params (an object's raw bytes, or nil), the stateless
// era's _meta added.
func (s *session) request(ctx context.Context, timeout time.Duration, method string, params []byte) (answer, error) {
	id := s.newID()
	return s.roundTrip(ctx, timeout, id, s.build(id, method, params))
}

func (s *session) build(id []byte, method string, params []byte) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	b = append(b, `,"method":`...)
	b = jsonlex.AppendString(b, method)
	if params == nil && s.meta != nil {
		params = []byte("{}")
	}
	if params != nil {
		b = append(b, `,"params":`...)
		if s.meta != nil {
			b = withMeta(b, params, s.meta)
		} else {
			b = append(b, params...)
		}
	}
	return append(b, '}')
}

// withMeta appends the object params with member _meta set to meta (replacing one it
// has), its other bytes unchanged.
func withMeta(b, params, meta []byte) []byte {
	ms, _, ok := jsonlex.Members(params, 0)
	if !ok {
		return append(b, params...)
	}
	b = append(b, '{')
	n := 0
	for _, m := range ms {
		if jsonlex.KeyIs(params[m.Key.Start:m.Key.End], "_meta") {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, params[m.Key.Start:m.Value.End]...)
		n++
	}
	if n > 0 {
		b = append(b, ',')
	}
	b = append(b, `"_meta":`...)
	b = append(b, meta...)
	return append(b, '}')
}

// handshake makes the handshake the recorded host made. In the session era the host's
// initialize is given to upstream.Setup with the server's recorded answer, and the
// re-handshake Setup builds from it (the host's bytes, a new id) is what is sent: the
// same protocol version, capabilities and client info; an answer in another version
// is refused by Setup.CheckInitialize. In the stateless era nothing is set up: every
// request carries the recorded _meta, and a recorded server/discover is made again.
func (s *session) handshake(ctx context.Context, h *cassette.Header) (initResult []byte, err error) {
	if h.Era == cassette.EraStateless {
		s.meta = h.Meta
		if h.DiscoverResult != nil {
			a, err := s.request(ctx, 0, "server/discover", nil)
			if err != nil {
				return nil, fmt.Errorf("server/discover: %w", err)
			}
			if a.err != nil {
				return nil, fmt.Errorf("server/discover was refused: %s", a.err)
			}
			return a.result, nil
		}
		return nil, nil
	}
	params := h.Initialize
	if params == nil {
		// A recording that saw no handshake (a host that attached late): a plain one.
		params = []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bir-proxy verify","version":"1"}}`)
	}
	setup := upstream.NewSetup()
	rec := []byte(`"bir-verify:recorded"`)
	setup.FromHost(append(append([]byte(`{"jsonrpc":"2.0","id":`), rec...), append([]byte(`,"method":"initialize","params":`), append(params, '}')...)...))
	recResult := h.InitializeResult
	if recResult == nil {
		recResult = []byte(`{"protocolVersion":` + string(jsonlex.Get(params, "protocolVersion")) + `}`)
	}
	setup.FromServer(append(append([]byte(`{"jsonrpc":"2.0","id":`), rec...), append([]byte(`,"result":`), append(recResult, '}')...)...))
	setup.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	rh := setup.Rehandshake(s.newID)
	if rh.Initialize == nil {
		return nil, errors.New("the recorded initialize cannot be made again")
	}
	a, err := s.roundTrip(ctx, 0, rh.InitializeID, rh.Initialize)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if _, err := setup.CheckInitialize(a.msg); err != nil {
		return nil, err
	}
	for _, m := range rh.After {
		if bytes.Contains(m, []byte(`"id"`)) {
			continue // only the notification: the recording has no setLevel or subscriptions
		}
		if err := s.send(ctx, nil, m); err != nil {
			return nil, fmt.Errorf("notifications/initialized: %w", err)
		}
	}
	return a.result, nil
}

// maxPages bounds the tools/list pages followed.
const maxPages = 1000

// maxToolsBytes bounds the tools kept from the server's tools/list, all pages
// together: every page was kept twice (a map of copies, and the list for --update),
// without a bound on bytes; a server paging for ever with big pages took 2 GB.
const maxToolsBytes = 8 << 20

// listTools lists the server's tools, every page: name → tool object, and the list of
// them all. Past maxToolsBytes (or maxPages) it stops paging: cut says so, and the
// tools are those read before.
func (s *session) listTools(ctx context.Context) (tools map[string][]byte, all []byte, cut string, err error) {
	type span struct{ start, end int }
	at := map[string]span{} // into all: the tools are kept once
	var cursor []byte
	pages := 0
	for ; pages < maxPages && cut == ""; pages++ {
		var params []byte
		if cursor != nil {
			params = append(append([]byte(`{"cursor":`), cursor...), '}')
		}
		a, err := s.request(ctx, 0, "tools/list", params)
		if err != nil {
			return nil, nil, "", fmt.Errorf("tools/list: %w", err)
		}
		if a.err != nil {
			return nil, nil, "", fmt.Errorf("tools/list was refused: %s", a.err)
		}
		jsonlex.EachElement(jsonlex.Get(a.result, "tools"), func(t []byte) {
			if cut != "" {
				return
			}
			if len(all)+len(t)+2 > maxToolsBytes {
				cut = fmt.Sprintf("the server's tools/list passed %d MiB on page %d: verify stopped paging, and its tools past that were not read", maxToolsBytes>>20, pages+1)
				return
			}
			if all == nil {
				all = []byte{'['}
			} else {
				all = append(all, ',')
			}
			at[jsonlex.StringOf(jsonlex.Get(t, "name"))] = span{len(all), len(all) + len(t)}
			all = append(all, t...)
		})
		cursor = jsonlex.Get(a.result, "nextCursor")
		if cursor == nil || string(cursor) == "null" || string(cursor) == `""` {
			break
		}
		cursor = bytes.Clone(cursor)
	}
	if pages == maxPages && cut == "" {
		cut = fmt.Sprintf("the server's tools/list had more than %d pages: verify stopped paging, and its tools past them were not read", maxPages)
	}
	if all != nil {
		all = append(all, ']')
	}
	tools = make(map[string][]byte, len(at))
	for name, sp := range at {
		tools[name] = all[sp.start:sp.end:sp.end]
	}
	return tools, all, cut, nil
}
