// Package recordertest is a reference recorder for tests: a real HTTP server on
// 127.0.0.1 that speaks the recorder side of SPEC §5, records everything it receives,
// and has fault switches (Down, Slow, Fail, Restart, WrongToken) a test can flip at any
// moment.
//
// It deliberately does not import package recorder: it decodes what arrives on the wire
// on its own, so a field the proxy names wrongly shows up as a missing field here.
package recordertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// maxBody bounds what one request may carry; a report is capped far below this.
const maxBody = 32 << 20

// maxPollWait bounds how long a poll is held whatever waitMs asks for.
const maxPollWait = time.Minute

// Request is one HTTP request the recorder received, as it arrived, with the status it
// was answered with.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Status int
	At     time.Time
}

// Step is a step report the recorder accepted the first time its (proxyId, seq)
// arrived; repeats are counted by Duplicates and not listed again.
type Step struct {
	ProxyID string
	Server  string
	Seq     uint64
	Tool    string
	Body    []byte // the request body, byte for byte
	At      time.Time
}

// Get reads one field of the report with a gjson path, e.g. "args.title" or "callId".
func (s Step) Get(path string) gjson.Result { return gjson.GetBytes(s.Body, path) }

// Decode unmarshals the report into v.
func (s Step) Decode(v any) error { return json.Unmarshal(s.Body, v) }

// Registration is one accepted POST /proxy/register.
type Registration struct {
	ProxyID string
	Server  string
	PID     int
	Body    []byte
	At      time.Time
}

// Get reads one field of the registration with a gjson path, e.g. "tools" or "upstream.command".
func (r Registration) Get(path string) gjson.Result { return gjson.GetBytes(r.Body, path) }

// Result is one accepted POST /proxy/result.
type Result struct {
	ProxyID    string
	DispatchID string
	Outcome    string
	Body       []byte
	At         time.Time
}

// Get reads one field of the result with a gjson path, e.g. "result.content.0.text".
func (r Result) Get(path string) gjson.Result { return gjson.GetBytes(r.Body, path) }

// Dispatch is a tool call the recorder asks a proxy to run (SPEC §4), handed out in
// the answer to the proxy's next poll.
type Dispatch struct {
	DispatchID string
	Tool       string
	// Arguments is sent as it is; nil leaves the member out.
	Arguments json.RawMessage
	// TimeoutMs is sent when it is not 0.
	TimeoutMs int
}

// Handed is a dispatch or cancel the recorder put in a poll answer.
type Handed struct {
	ProxyID    string
	DispatchID string
	Cancel     bool // in the cancel list, not a dispatch
	At         time.Time
}

// Snapshot is what the recorder has received so far. Wait hands one to its condition;
// the slices must be read only.
type Snapshot struct {
	Requests      []Request
	Steps         []Step
	Registrations []Registration
	Results       []Result
	Handed        []Handed // dispatches and cancels put in poll answers, in order
	Duplicates    int
	Polling       int // polls being held right now
	Refused       int // connections accepted and cut while Unreachable
}

// Server is a running reference recorder.
type Server struct {
	addr string // host:port, kept across Down/Up so the proxy finds it again

	mu         sync.Mutex
	srv        *http.Server
	ln         net.Listener  // srv's
	gone       chan struct{} // closed when the current listener goes down; ends held polls
	closed     bool
	token      string
	wrongToken bool
	slow       time.Duration
	pollHold   time.Duration // 0: polls are held as long as waitMs asks
	failStatus int
	batch      bool   // register answers batch: true, and step POSTs may carry arrays
	loseSteps  int    // step POSTs still to take and then cut off without an answer
	okStatus   int    // answers in place of 200 to what the recorder accepted
	redirectTo string // Location of the redirect every /proxy/ request gets
	redirectSt int
	known      map[string]bool // proxyIds registered since the last Restart
	seen       map[stepKey]bool
	requests   []Request
	steps      []Step
	regs       []Registration
	results    []Result
	duplicates int
	polling    int
	changed    chan struct{} // closed and replaced whenever anything is recorded

	// Per proxyId: dispatches and cancels waiting for its next poll. They survive a
	// Restart, as a real recorder's scenario state would.
	outbox   map[string]*outbox
	handed   []Handed
	queued   chan struct{} // closed and replaced whenever a dispatch or cancel is queued
	blackout net.Listener  // Unreachable's listener, which accepts and cuts
	cutDone  chan struct{} // closed when blackout's accept loop has ended
	refused  int
}

type outbox struct {
	dispatches []Dispatch
	cancels    []string
}

type stepKey struct {
	proxyID string
	seq     uint64
}

// Start starts a recorder on a free port of 127.0.0.1 with a random token. It is closed
// when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := Listen()
	if err != nil {
		tb.Fatalf("recordertest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Listen starts a recorder like Start, for callers without a testing.TB; the caller
// must Close it.
func Listen() (*Server, error) {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, fmt.Errorf("make token: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		addr:    ln.Addr().String(),
		token:   hex.EncodeToString(tok[:]),
		known:   map[string]bool{},
		seen:    map[stepKey]bool{},
		changed: make(chan struct{}),
		outbox:  map[string]*outbox{},
		queued:  make(chan struct{}),
	}
	s.serve(ln)
	return s, nil
}

// URL is the recorder's base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return "http://" + s.addr }

// Token is the bearer token the recorder expects (unless WrongToken is on).
func (s *Server) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.token
}

// Env is the environment that points a proxy at this recorder.
func (s *Server) Env() []string {
	return []string{"BIR_RECORDER_URL=" + s.URL(), "BIR_RECORDER_TOKEN=" + s.Token()}
}

// WriteDiscoveryFile writes dir/.bir/recorder.json naming this recorder, as a real
// recorder does at start, and returns its path. The file is replaced atomically, so a
// proxy reading it meanwhile sees the old or the new one, never half of it.
func (s *Server) WriteDiscoveryFile(dir string) (string, error) {
	body, err := json.Marshal(map[string]any{"url": s.URL(), "token": s.Token(), "pid": os.Getpid()})
	if err != nil {
		return "", err
	}
	bir := filepath.Join(dir, ".bir")
	if err := os.MkdirAll(bir, 0o700); err != nil {
		return "", fmt.Errorf("write discovery file: %w", err)
	}
	path := filepath.Join(bir, "recorder.json")
	tmp, err := os.CreateTemp(bir, "recorder-*.json")
	if err != nil {
		return "", fmt.Errorf("write discovery file: %w", err)
	}
	_, werr := tmp.Write(append(body, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write discovery file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write discovery file: %w", err)
	}
	return path, nil
}

// Close stops the recorder for good.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.Down()
	s.endBlackout()
}

// Unreachable is Down, except that the port keeps accepting connections and cuts each
// at once, counting them (Snapshot.Refused, Refused): a test can see how often a proxy
// knocks while the recorder is away. Up ends it.
func (s *Server) Unreachable() error {
	s.Down()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blackout != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("recordertest: listen on %s to cut connections: %w", s.addr, err)
	}
	s.blackout, s.cutDone = ln, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // the listener was closed by Up or Close
			}
			c.Close()
			s.mu.Lock()
			s.refused++
			s.notifyLocked()
			s.mu.Unlock()
		}
	}(s.cutDone)
	return nil
}

// Refused is how many connections were cut while Unreachable.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// endBlackout closes Unreachable's listener, if any, and waits for its loop.
func (s *Server) endBlackout() {
	s.mu.Lock()
	ln, done := s.blackout, s.cutDone
	s.blackout, s.cutDone = nil, nil
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
		<-done
	}
}

// Dispatch queues dispatches for proxyID, handed out in the answer to its next poll
// (a poll being held is answered at once).
func (s *Server) Dispatch(proxyID string, ds ...Dispatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.outboxLocked(proxyID)
	o.dispatches = append(o.dispatches, ds...)
	s.wakePollsLocked()
}

// Cancel puts dispatchIDs in the cancel list of proxyID's next poll answer.
func (s *Server) Cancel(proxyID string, dispatchIDs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.outboxLocked(proxyID)
	o.cancels = append(o.cancels, dispatchIDs...)
	s.wakePollsLocked()
}

func (s *Server) outboxLocked(proxyID string) *outbox {
	o := s.outbox[proxyID]
	if o == nil {
		o = &outbox{}
		s.outbox[proxyID] = o
	}
	return o
}

func (s *Server) wakePollsLocked() {
	close(s.queued)
	s.queued = make(chan struct{})
}

// takeLocked empties proxyID's outbox into a poll answer.
func (s *Server) takeLocked(proxyID string) (answer []byte, some bool) {
	o := s.outbox[proxyID]
	if o == nil || len(o.dispatches)+len(o.cancels) == 0 {
		return []byte(`{"dispatches":[],"cancel":[]}`), false
	}
	type wire struct {
		DispatchID string          `json:"dispatchId"`
		Tool       string          `json:"tool"`
		Arguments  json.RawMessage `json:"arguments,omitempty"`
		TimeoutMs  int             `json:"timeoutMs,omitempty"`
	}
	ds := make([]wire, 0, len(o.dispatches))
	now := time.Now()
	for _, d := range o.dispatches {
		ds = append(ds, wire{d.DispatchID, d.Tool, d.Arguments, d.TimeoutMs})
		s.handed = append(s.handed, Handed{ProxyID: proxyID, DispatchID: d.DispatchID, At: now})
	}
	cancels := append([]string{}, o.cancels...)
	for _, id := range cancels {
		s.handed = append(s.handed, Handed{ProxyID: proxyID, DispatchID: id, Cancel: true, At: now})
	}
	o.dispatches, o.cancels = nil, nil
	b, err := json.Marshal(map[string]any{"dispatches": ds, "cancel": cancels})
	if err != nil {
		panic(err) // only raw Arguments could fail, and the test wrote them
	}
	return b, true
}

// Down stops listening: new connections are refused and open ones are cut, as when the
// recorder process is gone.
func (s *Server) Down() {
	s.mu.Lock()
	srv, gone, ln := s.srv, s.gone, s.ln
	s.srv, s.gone, s.ln = nil, nil, nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	close(gone)
	srv.Close()
	// Closed here too: Serve may not have started yet, and then it closes the
	// listener only later, while Up or Unreachable already wants the port back.
	ln.Close()
}

// Up listens again on the same port after Down.
func (s *Server) Up() error {
	s.mu.Lock()
	up, closed := s.srv != nil, s.closed
	s.mu.Unlock()
	if up {
		return nil
	}
	if closed {
		return errors.New("recordertest: Up after Close")
	}
	s.endBlackout()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("recordertest: listen again on %s: %w", s.addr, err)
	}
	s.serve(ln)
	return nil
}

// Restart behaves like a recorder process that restarted on the same port: connections
// are cut and every registered proxy is forgotten (steps and polls from them get
// 404 unknown_proxy until they register again). What it has stored — the reports and
// which (proxyId, seq) it has seen — survives, as a real recorder's database would.
func (s *Server) Restart() error {
	s.Down()
	s.mu.Lock()
	s.known = map[string]bool{}
	s.mu.Unlock()
	return s.Up()
}

// Forget makes the recorder forget every registered proxy without cutting connections,
// so the next step or poll of each gets 404 unknown_proxy (Restart does the same and
// also drops connections, which a proxy may see as the recorder being unreachable).
func (s *Server) Forget() {
	s.mu.Lock()
	s.known = map[string]bool{}
	s.mu.Unlock()
}

// Slow makes every request take d before it is answered (0 turns it off).
func (s *Server) Slow(d time.Duration) {
	s.mu.Lock()
	s.slow = d
	s.mu.Unlock()
}

// HoldPolls caps how long a poll is held, whatever its waitMs (a recorder that answers
// polls early, or at once); 0 turns it off.
func (s *Server) HoldPolls(d time.Duration) {
	s.mu.Lock()
	s.pollHold = d
	s.mu.Unlock()
}

// Batch makes the recorder say, in its register answers, that it takes several reports
// per step POST (SPEC §5), and accept a JSON array of reports there: all of them, or
// none (answered with the status the first refused report gets). Off, an array is
// refused with 400, as a recorder that never agreed to batching would.
func (s *Server) Batch(on bool) {
	s.mu.Lock()
	s.batch = on
	s.mu.Unlock()
}

// LoseAnswers makes the recorder take the next n step POSTs (storing their reports)
// and then cut the connection instead of answering, as when a recorder dies between
// committing and replying: the proxy must send them again, and the repeats are
// ignored (Duplicates counts them).
func (s *Server) LoseAnswers(n int) {
	s.mu.Lock()
	s.loseSteps = n
	s.mu.Unlock()
}

// Fail makes every /proxy/ request answer status (e.g. 500) without acting on it;
// 0 turns it off.
func (s *Server) Fail(status int) {
	s.mu.Lock()
	s.failStatus = status
	s.mu.Unlock()
}

// Answer makes the recorder answer every request it acts on with status (201, 202,
// 204, ...) instead of 200, as a recorder built on another framework may; 0 turns it
// off. 204 comes without a body.
func (s *Server) Answer(status int) {
	s.mu.Lock()
	s.okStatus = status
	s.mu.Unlock()
}

// Redirect makes every /proxy/ request answer status (301, 302, 307, 308, ...) with a
// Location of location, without acting on it, as a recorder moved behind a reverse
// proxy may; status 0 turns it off.
func (s *Server) Redirect(status int, location string) {
	s.mu.Lock()
	s.redirectSt, s.redirectTo = status, location
	s.mu.Unlock()
}

// WrongToken makes the recorder expect a different token than the one it advertises,
// so every /proxy/ request gets 401, as when a proxy holds a stale token.
func (s *Server) WrongToken(on bool) {
	s.mu.Lock()
	s.wrongToken = on
	s.mu.Unlock()
}

// SetToken changes the token the recorder expects and advertises (a recorder that
// restarted with a new token; call WriteDiscoveryFile to publish it).
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	s.token = token
	s.mu.Unlock()
}

// Requests is every request received so far, in arrival order (answered ones only).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		r.Body = slices.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Steps is every accepted step report, once per (proxyId, seq), in arrival order.
func (s *Server) Steps() []Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneSteps(s.steps)
}

// Registrations is every accepted register call, in arrival order.
func (s *Server) Registrations() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.regs)
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

// Results is every accepted dispatch result, in arrival order.
func (s *Server) Results() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.results)
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

// Duplicates counts step reports whose (proxyId, seq) had already been accepted.
func (s *Server) Duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicates
}

// Wait blocks until cond holds for what has been received, or ctx is done. cond is
// called again after every request and whenever a poll starts or stops being held; it
// must not keep or modify the snapshot.
func (s *Server) Wait(ctx context.Context, cond func(Snapshot) bool) (Snapshot, error) {
	for {
		s.mu.Lock()
		snap := Snapshot{
			Requests:      s.requests[:len(s.requests):len(s.requests)],
			Steps:         s.steps[:len(s.steps):len(s.steps)],
			Registrations: s.regs[:len(s.regs):len(s.regs)],
			Results:       s.results[:len(s.results):len(s.results)],
			Handed:        s.handed[:len(s.handed):len(s.handed)],
			Duplicates:    s.duplicates,
			Polling:       s.polling,
			Refused:       s.refused,
		}
		changed := s.changed
		s.mu.Unlock()
		if cond(snap) {
			return snap, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return snap, fmt.Errorf("recordertest: waiting: %w (have %d steps, %d registrations, %d requests)",
				ctx.Err(), len(snap.Steps), len(snap.Registrations), len(snap.Requests))
		}
	}
}

// WaitSteps waits until at least n distinct step reports have been accepted and
// returns them all.
func (s *Server) WaitSteps(ctx context.Context, n int) ([]Step, error) {
	snap, err := s.Wait(ctx, func(v Snapshot) bool { return len(v.Steps) >= n })
	return cloneSteps(snap.Steps), err
}

// WaitRegistrations waits until at least n register calls have been accepted and
// returns them all.
func (s *Server) WaitRegistrations(ctx context.Context, n int) ([]Registration, error) {
	if _, err := s.Wait(ctx, func(v Snapshot) bool { return len(v.Registrations) >= n }); err != nil {
		return s.Registrations(), err
	}
	return s.Registrations(), nil
}

func cloneSteps(in []Step) []Step {
	out := slices.Clone(in)
	for i := range out {
		out[i].Body = slices.Clone(out[i].Body)
	}
	return out
}

func (s *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv, s.gone, s.ln = srv, make(chan struct{}), ln
	s.mu.Unlock()
	go srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed at Down
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		return // the connection is gone; nothing was received
	}
	s.mu.Lock()
	slow, gone, okStatus, redirectSt, redirectTo := s.slow, s.gone, s.okStatus, s.redirectSt, s.redirectTo
	s.mu.Unlock()
	if slow > 0 {
		t := time.NewTimer(slow)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}

	var status int
	var answer []byte
	if redirectSt != 0 && strings.HasPrefix(r.URL.Path, "/proxy/") {
		status = redirectSt
		w.Header().Set("Location", redirectTo)
	} else {
		status, answer = s.route(r, body, gone)
		if status == http.StatusOK && okStatus != 0 {
			status = okStatus
			if status == http.StatusNoContent {
				answer = nil
			}
		}
	}

	s.mu.Lock()
	if r.URL.Path == "/proxy/step" && status >= 200 && status < 300 && s.loseSteps > 0 {
		s.loseSteps--
		s.notifyLocked()
		s.mu.Unlock()
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		s.mu.Lock()
	}
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body,
		Status: status, At: time.Now(),
	})
	s.notifyLocked()
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(answer) //nolint:errcheck // the proxy going away is its business
}

// route answers one request. gone is closed when the listener the request came in on
// goes down, which ends a held poll early.
func (s *Server) route(r *http.Request, body []byte, gone chan struct{}) (int, []byte) {
	if r.URL.Path == "/health" {
		if r.Method != http.MethodGet {
			return http.StatusMethodNotAllowed, errorBody("method_not_allowed")
		}
		return http.StatusOK, []byte(`{"ok":true}`)
	}
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, errorBody("method_not_allowed")
	}
	s.mu.Lock()
	want := s.token
	if s.wrongToken {
		want = "not-" + s.token
	}
	fail, batch := s.failStatus, s.batch
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+want {
		return http.StatusUnauthorized, errorBody("unauthorized")
	}
	if fail != 0 {
		return fail, errorBody("injected_failure")
	}
	if !gjson.ValidBytes(body) {
		return http.StatusBadRequest, errorBody("body is not a JSON object")
	}
	if r.URL.Path == "/proxy/step" && batch && firstByte(body) == '[' {
		return s.steps1(gjson.ParseBytes(body).Array())
	}
	if firstByte(body) != '{' {
		return http.StatusBadRequest, errorBody("body is not a JSON object")
	}
	proxyID := gjson.GetBytes(body, "proxyId").String()
	if proxyID == "" {
		return http.StatusBadRequest, errorBody("proxyId missing")
	}

	switch r.URL.Path {
	case "/proxy/register":
		server := gjson.GetBytes(body, "server")
		if server.Type != gjson.String || server.String() == "" {
			return http.StatusBadRequest, errorBody("server missing")
		}
		s.mu.Lock()
		s.known[proxyID] = true
		s.regs = append(s.regs, Registration{
			ProxyID: proxyID, Server: server.String(),
			PID: int(gjson.GetBytes(body, "pid").Int()), Body: body, At: time.Now(),
		})
		batch := s.batch
		s.mu.Unlock()
		if batch {
			return http.StatusOK, []byte(`{"ok":true,"batch":true}`)
		}
		return http.StatusOK, []byte(`{"ok":true}`)

	case "/proxy/step":
		return s.steps1([]gjson.Result{gjson.ParseBytes(body)})

	case "/proxy/poll":
		s.mu.Lock()
		known := s.known[proxyID]
		s.mu.Unlock()
		if !known {
			return http.StatusNotFound, errorBody("unknown_proxy")
		}
		wait := time.Duration(gjson.GetBytes(body, "waitMs").Int()) * time.Millisecond
		if wait > maxPollWait {
			wait = maxPollWait
		}
		s.mu.Lock()
		if s.pollHold > 0 && wait > s.pollHold {
			wait = s.pollHold
		}
		s.mu.Unlock()
		t := time.NewTimer(wait)
		defer t.Stop()
		held := false
		for {
			s.mu.Lock()
			if answer, some := s.takeLocked(proxyID); some || wait <= 0 {
				if held {
					s.polling--
				}
				s.notifyLocked()
				s.mu.Unlock()
				return http.StatusOK, answer
			}
			queued := s.queued
			if !held {
				held = true
				s.polling++
				s.notifyLocked()
			}
			s.mu.Unlock()
			select {
			case <-queued:
				continue
			case <-t.C:
			case <-gone:
			case <-r.Context().Done():
			}
			s.countPoll(-1)
			return http.StatusOK, []byte(`{"dispatches":[],"cancel":[]}`)
		}

	case "/proxy/result":
		s.mu.Lock()
		s.results = append(s.results, Result{
			ProxyID: proxyID, DispatchID: gjson.GetBytes(body, "dispatchId").String(),
			Outcome: gjson.GetBytes(body, "outcome").String(), Body: body, At: time.Now(),
		})
		s.mu.Unlock()
		return http.StatusOK, []byte(`{"ok":true}`)
	}
	return http.StatusNotFound, errorBody("no_such_route")
}

// steps1 takes the reports of one step POST: every one of them, or none. reports are
// the body's values (one, or the elements of an array); each is read in one pass.
func (s *Server) steps1(reports []gjson.Result) (int, []byte) {
	if len(reports) == 0 {
		return http.StatusBadRequest, errorBody("empty batch")
	}
	taken := make([]Step, 0, len(reports))
	for _, rep := range reports {
		if !rep.IsObject() {
			return http.StatusBadRequest, errorBody("a report is not a JSON object")
		}
		st := Step{Body: []byte(rep.Raw)}
		var seq gjson.Result
		// One pass over the report's members. Of a repeated name the first is kept,
		// as gjson's Get would.
		var got [4]bool
		rep.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "proxyId":
				if !got[0] {
					got[0], st.ProxyID = true, v.String()
				}
			case "seq":
				if !got[1] {
					got[1], seq = true, v
				}
			case "server":
				if !got[2] {
					got[2], st.Server = true, v.String()
				}
			case "tool":
				if !got[3] {
					got[3], st.Tool = true, v.String()
				}
			}
			return true
		})
		if st.ProxyID == "" {
			return http.StatusBadRequest, errorBody("proxyId missing")
		}
		if seq.Type != gjson.Number || seq.Uint() == 0 || strconv.FormatUint(seq.Uint(), 10) != seq.Raw {
			return http.StatusBadRequest, errorBody("seq must be a positive integer")
		}
		st.Seq = seq.Uint()
		taken = append(taken, st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range taken {
		if !s.known[st.ProxyID] {
			return http.StatusNotFound, errorBody("unknown_proxy")
		}
	}
	now := time.Now()
	for _, st := range taken {
		key := stepKey{st.ProxyID, st.Seq}
		if s.seen[key] {
			s.duplicates++
			continue
		}
		s.seen[key] = true
		st.At = now
		s.steps = append(s.steps, st)
	}
	return http.StatusOK, []byte(`{"ok":true}`)
}

// firstByte is the first byte of body that is not JSON whitespace, or 0.
func firstByte(body []byte) byte {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// readBody reads a request's body, at most maxBody bytes, into a buffer of the size
// Content-Length announces, so a large batch is not grown by doubling.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= maxBody {
		buf := make([]byte, n)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, maxBody))
}

func (s *Server) countPoll(delta int) {
	s.mu.Lock()
	s.polling += delta
	s.notifyLocked()
	s.mu.Unlock()
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}
