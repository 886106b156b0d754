// Package mock is `bir-proxy mock`'s answering core: an MCP server that answers from
// cassettes (docs/mock.md). The handshake is the recorded one, tools/list the recorded
// tools, and each tools/call is matched by its tool's name and the fingerprint of its
// arguments (internal/jcs, as the proxy records them). Answers are spliced: the
// recorded bytes with the request's raw id, never decoded and encoded again.
package mock

import (
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jcs"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Error codes of the mock's own answers.
const (
	// CodeUnmatched: no recorded call matches the tools/call (and no fallback).
	CodeUnmatched = -32602
	// CodeNoAnswer: the matched recorded call got no answer (cancelled, timeout,
	// upstream_lost), or the fallback failed.
	CodeNoAnswer = -32603
	// CodeMethodNotFound: a method the mock does not answer.
	CodeMethodNotFound = -32601
)

// Fallback answers a tools/call no recording matches: a live server.
type Fallback interface {
	// Call sends a tools/call of tool with args (raw, nil when absent) and returns the
	// server's raw result or error.
	Call(ctx context.Context, tool string, args []byte) (result, rpcErr []byte, err error)
}

// Options are the mock's.
type Options struct {
	// Latency: answer each recorded call after its recorded duration.
	Latency bool
	// Fallback, when set, answers unmatched calls; Record, when set, is told each of
	// its answers (it must not wait: cassette.Writer.Call does not).
	Fallback Fallback
	Record   func(cassette.Recorded)
}

// entry is one recorded answer.
type entry struct {
	seq      int64
	file     int // which cassette
	tool     string
	args     []byte
	result   []byte
	err      []byte
	outcome  string
	duration time.Duration
}

// group is the recorded calls of one tool and fingerprint, in recorded order; next is
// the one the next identical call gets (the last one again past the end).
type group struct {
	calls []*entry
	next  int
}

// Mock answers from recordings. Its methods may be called from any goroutine.
type Mock struct {
	o           Options
	era         string
	server      string
	initResult  []byte
	discover    []byte
	tools       []byte // the tools/list result
	pong        []byte // the ping result
	fingerprint func([]byte) (string, error)

	mu       sync.Mutex
	groups   map[string]*group
	byTool   map[string][]*entry // every replayable call of a tool, recorded order
	toolName []string            // tools recorded or listed, first seen first
	named    map[string]bool     // the names in toolName
	recMu    sync.Mutex          // Record is called one at a time
	held     atomic.Int64        // the HTTP request bodies being read (http.go)
	// bodyTimeout and maxHeld bound them (http.go's constants; tests' own).
	bodyTimeout time.Duration
	maxHeld     int64
}

// Load reads the cassettes at paths whole (each strictly: a line that does not read
// is an error naming it) and returns a mock answering from them.
func Load(paths []string, o Options) (*Mock, error) {
	var hs []*cassette.Header
	var calls [][]*cassette.Call
	for _, p := range paths {
		h, cs, err := readFile(p)
		if err != nil {
			return nil, err
		}
		hs = append(hs, h)
		calls = append(calls, cs)
	}
	return New(hs, calls, o), nil
}

func readFile(path string) (*cassette.Header, []*cassette.Call, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r, err := cassette.NewReader(f, path)
	if err != nil {
		return nil, nil, err
	}
	var cs []*cassette.Call
	for {
		c, err := r.Next()
		if err == io.EOF {
			return r.Header(), cs, nil
		}
		if err != nil {
			return nil, nil, err
		}
		cs = append(cs, c)
	}
}

// New returns a mock answering from headers[i] and their calls[i]: the handshake of
// the first header that has one, the tools of every header (a name's first listing
// wins), and the calls of all, in the order given.
func New(headers []*cassette.Header, calls [][]*cassette.Call, o Options) *Mock {
	m := &Mock{o: o, era: cassette.EraUnknown, pong: []byte("{}"), groups: map[string]*group{}, byTool: map[string][]*entry{},
		fingerprint: jcs.Fingerprint, bodyTimeout: bodyTimeout, maxHeld: maxHeld}
	seen := map[string]bool{}
	m.named = seen
	var tools [][]byte
	for _, h := range headers {
		if m.server == "" {
			m.server = h.Server
		}
		if m.era == cassette.EraUnknown && h.Era != "" {
			m.era = h.Era
		}
		if m.initResult == nil && h.InitializeResult != nil {
			m.initResult = h.InitializeResult
		}
		if m.discover == nil && h.DiscoverResult != nil {
			m.discover = h.DiscoverResult
		}
		jsonlex.EachElement(h.Tools, func(t []byte) {
			name := jsonlex.StringOf(jsonlex.Get(t, "name"))
			if seen[name] {
				return
			}
			seen[name] = true
			m.toolName = append(m.toolName, name)
			tools = append(tools, t)
		})
	}
	if len(headers) == 1 && headers[0].Tools != nil {
		// One recording: its tools as recorded, byte for byte.
		m.tools = append(append([]byte(`{"tools":`), headers[0].Tools...), '}')
	} else {
		b := []byte(`{"tools":[`)
		for i, t := range tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, t...)
		}
		m.tools = append(b, ']', '}')
	}
	if m.era == cassette.EraStateless {
		// A 2026-07-28 result says it is whole, and a list how long it may be cached:
		// the SDK client refuses a tools/list answer without resultType, ttlMs and
		// cacheScope. The header keeps the tools, not the envelope: not cached.
		m.tools = append(m.tools[:len(m.tools)-1], `,"resultType":"complete","ttlMs":0,"cacheScope":"private"`...)
		if meta := jsonlex.Get(m.discover, "_meta"); meta != nil {
			// The server's own _meta (its serverInfo), as server/discover carried it.
			m.tools = append(append(m.tools, `,"_meta":`...), meta...)
		}
		m.tools = append(m.tools, '}')
		m.pong = []byte(`{"resultType":"complete"}`)
	}
	for i, cs := range calls {
		for _, c := range cs {
			if c.Redacted || c.TooLarge > 0 {
				continue // its arguments are not what was sent (or not kept): it matches nothing
			}
			m.add(&entry{seq: c.Seq, file: i, tool: c.Tool, args: c.Arguments, result: c.Result, err: c.Error,
				outcome: c.Outcome, duration: latency(c.DurationMs)})
		}
	}
	return m
}

// latency is a recorded duration as --latency recorded waits it: at most MaxLatency
// (a cassette's 1e12 ms was 31 years), compared in milliseconds before converting (a
// float64 past a Duration's range converts to what the platform makes of it: on amd64,
// a negative one).
func latency(ms float64) time.Duration {
	switch {
	case ms >= float64(MaxLatency/time.Millisecond):
		return MaxLatency
	case !(ms > 0):
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func (m *Mock) add(e *entry) {
	k := m.key(e.tool, e.args)
	g := m.groups[k]
	if g == nil {
		g = &group{}
		m.groups[k] = g
	}
	g.calls = append(g.calls, e)
	if !m.named[e.tool] {
		m.named[e.tool] = true
		m.toolName = append(m.toolName, e.tool)
	}
	m.byTool[e.tool] = append(m.byTool[e.tool], e)
}

// key is what a call is matched by: its tool and its arguments' fingerprint. Arguments
// with no canonical form (a lone surrogate, a number past a double) match by their
// bytes.
func (m *Mock) key(tool string, args []byte) string {
	fp, err := m.fingerprint(args)
	if err != nil {
		return tool + "\x00raw\x00" + string(args)
	}
	return tool + "\x00" + fp
}

// take returns the recorded answer for a call of tool with args, advancing its group:
// the recorded answers in order, then the last one again. nil: none matches.
func (m *Mock) take(tool string, args []byte) *entry {
	k := m.key(tool, args)
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[k]
	if g == nil {
		return nil
	}
	e := g.calls[g.next]
	if g.next < len(g.calls)-1 {
		g.next++
	}
	return e
}

// Answer is the mock's answer to one message: Reply now, or Wait for it.
type Answer struct {
	reply []byte
	delay time.Duration
	live  func(ctx context.Context) []byte
}

// Now says the answer needs no waiting: Wait returns at once.
func (a Answer) Now() bool { return a.delay <= 0 && a.live == nil }

// Wait returns the response (nil: nothing is answered, a notification's), after the
// recorded latency or the live server's answer; ctx ends the wait.
func (a Answer) Wait(ctx context.Context) []byte {
	if a.delay > 0 {
		t := time.NewTimer(a.delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
	if a.live != nil {
		return a.live(ctx)
	}
	return a.reply
}

// Take decides the answer to msg, one JSON-RPC message with fields f: which recorded
// answer a call gets is decided here, in the order messages are taken.
func (m *Mock) Take(msg []byte, f jsonlex.Fields) Answer {
	if !f.IsRequest() {
		return Answer{} // notifications (initialized, cancelled) and answers: nothing
	}
	switch jsonlex.StringOf(f.Method) {
	case "initialize":
		res := m.initResult
		if res == nil {
			res = m.plainInit(f.Params)
		}
		return Answer{reply: result(f.ID, res)}
	case "server/discover":
		if m.discover == nil {
			return Answer{reply: jsonlex.ErrorResponse(f.ID, CodeMethodNotFound, "bir-proxy mock: the recording has no server/discover")}
		}
		return Answer{reply: result(f.ID, m.discover)}
	case "ping":
		return Answer{reply: result(f.ID, m.pong)}
	case "tools/list":
		return Answer{reply: result(f.ID, m.tools)}
	case "tools/call":
		return m.call(f.ID, f.Params)
	}
	return Answer{reply: jsonlex.ErrorResponse(f.ID, CodeMethodNotFound, "bir-proxy mock does not answer "+jsonlex.StringOf(f.Method))}
}

// plainInit is the initialize result of a recording that holds none (its host
// attached late): the host's protocol version, tools, the recorded server's name.
func (m *Mock) plainInit(params []byte) []byte {
	v := jsonlex.Get(params, "protocolVersion")
	if v == nil || v[0] != '"' {
		v = []byte(`"2025-11-25"`)
	}
	b := append([]byte(`{"protocolVersion":`), v...)
	b = append(b, `,"capabilities":{"tools":{}},"serverInfo":{"name":`...)
	b = jsonlex.AppendString(b, m.server)
	return append(b, `,"version":"bir-proxy mock"}}`...)
}

func (m *Mock) call(id, params []byte) Answer {
	name := jsonlex.Get(params, "name")
	if name == nil || name[0] != '"' {
		return Answer{reply: jsonlex.ErrorResponse(id, CodeUnmatched, "bir-proxy mock: a tools/call without a name")}
	}
	tool := jsonlex.StringOf(name)
	args := jsonlex.Get(params, "arguments")
	e := m.take(tool, args)
	if e == nil {
		if m.o.Fallback != nil {
			id := append([]byte(nil), id...)
			if args != nil {
				args = append([]byte(nil), args...)
			}
			return Answer{live: func(ctx context.Context) []byte { return m.live(ctx, id, tool, args) }}
		}
		return Answer{reply: m.unmatched(id, tool, args)}
	}
	var reply []byte
	switch {
	case e.result != nil:
		reply = result(id, e.result)
	case e.err != nil:
		reply = append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"error":`...), e.err...)
		reply = append(reply, '}')
	case e.outcome == "cancelled" || e.outcome == "timeout":
		// As recorded: the host gave up on it (cancelled it, or stopped waiting), and
		// a host replaying the session does the same. An error here was an answer to
		// a call the host had cancelled, which the recording never had.
		return Answer{}
	default:
		reply = jsonlex.ErrorResponse(id, CodeNoAnswer, "bir-proxy mock: the recorded call (seq "+strconv.FormatInt(e.seq, 10)+") got no answer: "+e.outcome)
	}
	a := Answer{reply: reply}
	if m.o.Latency {
		a.delay = e.duration
	}
	return a
}

// live answers a call from the fallback server, and records it.
func (m *Mock) live(ctx context.Context, id []byte, tool string, args []byte) []byte {
	start := time.Now()
	res, rerr, err := m.o.Fallback.Call(ctx, tool, args)
	d := time.Since(start)
	if err != nil {
		return jsonlex.ErrorResponse(id, CodeNoAnswer, "bir-proxy mock: no recorded call matches, and the live server did not answer: "+err.Error())
	}
	if m.o.Record != nil {
		outcome := "ok"
		switch {
		case rerr != nil:
			outcome = "rpc_error"
		case string(jsonlex.Get(res, "isError")) == "true":
			outcome = "tool_error"
		}
		m.recMu.Lock()
		m.o.Record(cassette.Recorded{Tool: tool, Arguments: args, Outcome: outcome, Result: res, Error: rerr, StartedAt: start, Duration: d})
		m.recMu.Unlock()
	}
	if rerr != nil {
		b := append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"error":`...), rerr...)
		return append(b, '}')
	}
	return result(id, res)
}

// result splices a response: the raw id and the raw result, as recorded.
func result(id, res []byte) []byte {
	b := make([]byte, 0, len(id)+len(res)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, res...)
	return append(b, '}')
}
