// Command rawhttp is a raw MCP server over HTTP for tests that check byte fidelity
// and transport behaviour: Streamable HTTP (session or stateless era) or the legacy
// HTTP+SSE transport. Like rawserver it never decodes and re-encodes a message: ids
// and arguments are found with gjson and copied as the exact bytes received.
//
// It prints its URL on stdout ("http://127.0.0.1:PORT/mcp", or …/sse with --legacy)
// and serves until stdin closes or it gets SIGTERM.
//
// Flags:
//
//	--answer json|sse   how POSTed requests are answered (default json); sse sends a
//	                    priming event (an id, no data) first, with ids on every event
//	--stateless         no sessions: no Mcp-Session-Id, GET and DELETE get 405
//	--legacy            the 2024-11-05 HTTP+SSE transport: GET /sse, POST /message
//	--record FILE       append one JSON line per HTTP request: method, path, the
//	                    headers named Mcp-*, Authorization, Last-Event-Id, X-*, and the
//	                    body as a string (exact bytes)
//	--reply-size N      the size of the "big" tool's text (default 1 KiB)
//	--pretty            answer initialize with a pretty-printed (multi-line) body
//	--auth VALUE        answer 401 to every request whose Authorization is not VALUE
//	--chunked           JSON answers carry no Content-Length (HTTP/1.1 chunked): the
//	                    client learns their size only by reading them
//
// Requests (tools/call by tool name):
//
//	initialize         a result echoing the protocolVersion asked for; a session id
//	                   "s<N>" unless --stateless (a request other than initialize
//	                   without a known session id gets 400 with a JSON-RPC error, and
//	                   an unknown one 404, as the official servers do)
//	echo               text content = the raw params.arguments
//	big                text content of --reply-size bytes (or arguments.bytes)
//	hang               never answered; when the client goes away, a record line
//	                   {"method":"EVENT","path":"closed","body":ID}
//	sample             sends sampling/createMessage (id "srv-N") on the request's
//	                   stream (or, with --legacy, the event stream), waits for the
//	                   client's answer, and returns its raw bytes as the text
//	push               sends notifications/message with params = the raw arguments on
//	                   the session's GET stream, then answers "pushed"
//	expire             answers, then forgets the session (its next request gets 404)
//	break              (--answer sse) sends the priming event and a progress
//	                   notification, then closes the connection without the answer;
//	                   a GET with Last-Event-ID resumes the stream with it
//	slow               waits arguments.ms milliseconds (default 200)
//	anything else      an empty result {}
//
//	subscriptions/listen
//	                   (stateless era) an event stream that stays open: first
//	                   notifications/subscriptions/acknowledged with the request's id in
//	                   _meta and its params.notifications (less the keys drop-listens
//	                   named), then nothing until the client goes or drop-listens
//
// POST /control?cmd=expire-all forgets every session (a server restart).
// POST /control?cmd=drop-listens&without=K1,K2 closes every open listen stream's
// connection without an answer (a server restart, as its client sees it); later
// acknowledgments leave the filter keys K1, K2 out; with refuse=1, every later listen
// is answered HTTP 503 (a server that stays down for them).
// POST /control?cmd=end-listens&pad=N answers every open listen stream with a result
// carrying N bytes of padding, which ends it (a server that ends a stream).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidwall/gjson"
)

type config struct {
	answer    string
	stateless bool
	legacy    bool
	record    string
	replySize int
	pretty    bool
	auth      string
	chunked   bool
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("rawhttp", flag.ContinueOnError)
	fs.StringVar(&cfg.answer, "answer", "json", "json or sse")
	fs.BoolVar(&cfg.stateless, "stateless", false, "no sessions")
	fs.BoolVar(&cfg.legacy, "legacy", false, "HTTP+SSE (2024-11-05)")
	fs.StringVar(&cfg.record, "record", "", "record requests to FILE")
	fs.IntVar(&cfg.replySize, "reply-size", 1024, "size of the big tool's text")
	fs.BoolVar(&cfg.pretty, "pretty", false, "pretty-print the initialize answer")
	fs.StringVar(&cfg.auth, "auth", "", "the Authorization every request must carry")
	fs.BoolVar(&cfg.chunked, "chunked", false, "JSON answers without Content-Length (chunked)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "rawhttp: %v\n", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s := newServer(cfg)
	if cfg.record != "" {
		f, err := os.OpenFile(cfg.record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		s.rec = f
	}
	srv := &http.Server{Handler: s}
	path := "/mcp"
	if cfg.legacy {
		path = "/sse"
	}
	fmt.Printf("http://%s%s\n", ln.Addr(), path)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

type server struct {
	cfg config
	big []byte

	recMu sync.Mutex
	rec   io.Writer

	mu       sync.Mutex
	nextSess int
	sessions map[string]*sess
	nextSrv  int
	waiting  map[string]chan []byte // server→client requests awaiting the client's answer
	// broken holds the answers of streams closed on purpose ("break"), by the event
	// id a resumption names.
	broken  map[string][]byte
	nextEvt int
	// listens are the open listen streams, each closed by drop-listens; without, the
	// filter keys acknowledgments leave out.
	listens map[chan struct{}]bool
	// ends are the open listen streams' ways to be answered (end-listens): the pad.
	ends    map[chan int]bool
	without []string
	refuse  bool // listens get 503
}

type sess struct {
	id          string
	initialized bool          // the initialize answer went out
	push        chan []byte   // to the GET stream (or the legacy stream)
	gone        chan struct{} // closed when forgotten
}

func newServer(cfg config) *server {
	return &server{
		cfg:      cfg,
		big:      bytes.Repeat([]byte("x"), cfg.replySize),
		sessions: map[string]*sess{},
		waiting:  map[string]chan []byte{},
		broken:   map[string][]byte{},
		listens:  map[chan struct{}]bool{},
		ends:     map[chan int]bool{},
	}
}

func (s *server) record(r *http.Request, body []byte) {
	if s.rec == nil {
		return
	}
	h := map[string]string{}
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "mcp-") || lk == "authorization" || lk == "last-event-id" || strings.HasPrefix(lk, "x-") || lk == "accept" || lk == "content-type" {
			h[k] = strings.Join(vs, ", ")
		}
	}
	line, _ := json.Marshal(map[string]any{"method": r.Method, "path": r.URL.RequestURI(), "header": h, "body": string(body)})
	s.recMu.Lock()
	defer s.recMu.Unlock()
	_, _ = s.rec.Write(append(line, '\n'))
}

// recordEvent notes something the server saw that is not a request (a request whose
// stream the client closed), as a record line with method "EVENT".
func (s *server) recordEvent(what, detail string) {
	if s.rec == nil {
		return
	}
	line, _ := json.Marshal(map[string]any{"method": "EVENT", "path": what, "body": detail})
	s.recMu.Lock()
	defer s.recMu.Unlock()
	_, _ = s.rec.Write(append(line, '\n'))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.record(r, body)
	if r.URL.Path == "/control" {
		if r.URL.Query().Get("cmd") == "expire-all" {
			s.mu.Lock()
			for id, ss := range s.sessions {
				delete(s.sessions, id)
				close(ss.gone)
			}
			s.mu.Unlock()
		}
		if r.URL.Query().Get("cmd") == "end-listens" {
			pad, _ := strconv.Atoi(r.URL.Query().Get("pad"))
			s.mu.Lock()
			for ch := range s.ends {
				delete(s.ends, ch)
				ch <- pad // buffered
			}
			s.mu.Unlock()
		}
		if r.URL.Query().Get("cmd") == "drop-listens" {
			s.mu.Lock()
			if w := r.URL.Query().Get("without"); w != "" {
				s.without = strings.Split(w, ",")
			}
			s.refuse = r.URL.Query().Get("refuse") == "1"
			for ch := range s.listens {
				delete(s.listens, ch)
				close(ch)
			}
			s.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.cfg.auth != "" && r.Header.Get("Authorization") != s.cfg.auth {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rawhttp"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if s.cfg.legacy {
		s.serveLegacy(w, r, body)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.post(w, r, body)
	case http.MethodGet:
		s.get(w, r)
	case http.MethodDelete:
		if s.cfg.stateless {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		s.mu.Lock()
		if ss := s.sessions[r.Header.Get("Mcp-Session-Id")]; ss != nil {
			delete(s.sessions, ss.id)
			close(ss.gone)
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func jsonError(w http.ResponseWriter, status int, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","error":{"code":%d,"message":%q},"id":null}`, code, msg)
}

func (s *server) post(w http.ResponseWriter, r *http.Request, body []byte) {
	msg := gjson.ParseBytes(body)
	method := msg.Get("method").Str
	id := msg.Get("id")
	var ss *sess
	if !s.cfg.stateless && method != "initialize" {
		sid := r.Header.Get("Mcp-Session-Id")
		s.mu.Lock()
		ss = s.sessions[sid]
		s.mu.Unlock()
		switch {
		case sid == "":
			jsonError(w, http.StatusBadRequest, -32000, "Bad Request: No valid session ID provided")
			return
		case ss == nil:
			jsonError(w, http.StatusNotFound, -32001, "Session not found")
			return
		case !ss.initialized:
			jsonError(w, http.StatusBadRequest, -32000, "Bad Request: Server not initialized")
			return
		}
	}
	if !id.Exists() || method == "" {
		// A notification, or the client's answer to one of our requests.
		if !id.Exists() && method == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if method == "" {
			s.mu.Lock()
			ch := s.waiting[id.Raw]
			delete(s.waiting, id.Raw)
			s.mu.Unlock()
			if ch != nil {
				ch <- body
			}
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if method == "initialize" && !s.cfg.stateless {
		s.mu.Lock()
		s.nextSess++
		ss = &sess{id: "s" + strconv.Itoa(s.nextSess), push: make(chan []byte, 16), gone: make(chan struct{})}
		s.sessions[ss.id] = ss
		s.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", ss.id)
		// Initialized as the answer is made, as the official server does: from then on
		// a request on the session is taken (one sent before, without the session id
		// only the answer carries, could not name it).
		s.mu.Lock()
		ss.initialized = true
		s.mu.Unlock()
	}
	st := newStream(w, s, s.cfg.answer == "sse")
	s.handle(r.Context(), st, ss, msg, body)
}

// stream writes the messages of one answer: one JSON body, or SSE events.
type stream struct {
	w     http.ResponseWriter
	s     *server
	sse   bool
	began bool
}

func newStream(w http.ResponseWriter, s *server, sse bool) *stream {
	return &stream{w: w, s: s, sse: sse}
}

func (st *stream) begin() {
	if st.began {
		return
	}
	st.began = true
	if st.sse {
		st.w.Header().Set("Content-Type", "text/event-stream")
		st.w.WriteHeader(http.StatusOK)
		fmt.Fprintf(st.w, "id: %s\ndata:\n\n", st.s.eventID())
		st.w.(http.Flusher).Flush()
	}
}

// send writes one message: as an SSE event, or as the JSON body (the last message).
func (st *stream) send(msg []byte) {
	if !st.sse {
		st.w.Header().Set("Content-Type", "application/json")
		if !st.s.cfg.chunked {
			st.w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		}
		st.w.WriteHeader(http.StatusOK)
		_, _ = st.w.Write(msg)
		return
	}
	st.begin()
	bw := bufio.NewWriterSize(st.w, 64<<10)
	fmt.Fprintf(bw, "id: %s\ndata: ", st.s.eventID())
	bw.Write(msg)
	bw.WriteString("\n\n")
	bw.Flush()
	st.w.(http.Flusher).Flush()
}

// sendParts is send of the concatenation of parts, written without building it.
func (st *stream) sendParts(parts ...[]byte) {
	if st.sse {
		st.send(bytes.Join(parts, nil))
		return
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	st.w.Header().Set("Content-Type", "application/json")
	if !st.s.cfg.chunked {
		st.w.Header().Set("Content-Length", strconv.Itoa(n))
	}
	st.w.WriteHeader(http.StatusOK)
	for _, p := range parts {
		_, _ = st.w.Write(p)
	}
}

func (s *server) eventID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextEvt++
	return "e" + strconv.Itoa(s.nextEvt)
}

func result(id string, res string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + res + `}`)
}

func textResult(text []byte) string {
	b, _ := json.Marshal(string(text))
	return `{"content":[{"type":"text","text":` + string(b) + `}]}`
}

// handle answers one request on st (ss is its session, nil when stateless).
func (s *server) handle(ctx context.Context, st *stream, ss *sess, msg gjson.Result, body []byte) {
	id := msg.Get("id").Raw
	method := msg.Get("method").Str
	switch method {
	case "initialize":
		v := msg.Get("params.protocolVersion").Raw
		if v == "" {
			v = `"2025-06-18"`
		}
		res := `{"protocolVersion":` + v + `,"capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"rawhttp","version":"0.0.1"}}`
		if s.cfg.pretty {
			st.send([]byte("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": " + id + ",\n  \"result\": " + res + "\n}\n"))
			return
		}
		st.send(result(id, res))
	case "server/discover":
		st.send(result(id, `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete"}`))
	case "subscriptions/listen":
		s.listen(ctx, st.w, id, msg.Get("params.notifications"))
	case "tools/list":
		st.send(result(id, `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"route","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"q":{"type":"string"}}}}]}`))
	case "tools/call":
		args := msg.Get("params.arguments")
		switch msg.Get("params.name").Str {
		case "hang":
			st.begin()
			<-ctx.Done()
			// What the server saw: the client closed the request's stream.
			s.recordEvent("closed", id)
		case "big":
			n := int(args.Get("bytes").Int())
			text := s.big
			if n > 0 && n != len(s.big) {
				text = bytes.Repeat([]byte("y"), n)
			}
			// In parts, not one concatenation: the benchmark's 64 MiB answer must
			// cost the server little, so what is measured is the client.
			st.sendParts([]byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`), text, []byte(`"}]}}`))
		case "sample":
			s.mu.Lock()
			s.nextSrv++
			rid := `"srv-` + strconv.Itoa(s.nextSrv) + `"`
			ch := make(chan []byte, 1)
			s.waiting[rid] = ch
			s.mu.Unlock()
			req := []byte(`{"jsonrpc":"2.0","id":` + rid + `,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}}`)
			if st.sse {
				st.send(req)
			} else if ss != nil {
				ss.push <- req
			}
			select {
			case ans := <-ch:
				st.send(result(id, textResult(ans)))
			case <-ctx.Done():
			}
		case "push":
			if ss != nil {
				ss.push <- []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":` + args.Raw + `}`)
			}
			st.send(result(id, textResult([]byte("pushed"))))
		case "expire":
			st.send(result(id, textResult([]byte("expired"))))
			if ss != nil {
				s.mu.Lock()
				delete(s.sessions, ss.id)
				s.mu.Unlock()
				close(ss.gone)
			}
		case "break":
			st.begin()
			st.send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"b","progress":1}}`))
			s.mu.Lock()
			s.nextEvt++
			evt := "e" + strconv.Itoa(s.nextEvt)
			s.broken["e"+strconv.Itoa(s.nextEvt-1)] = append([]byte("id: "+evt+"\ndata: "), append(result(id, textResult([]byte("resumed"))), "\n\n"...)...)
			s.mu.Unlock()
			// Closing the connection without ending the stream: the client must
			// resume with a GET.
			if hj, ok := st.w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
				}
			}
		case "slow":
			ms := args.Get("ms").Int()
			if ms == 0 {
				ms = 200
			}
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				st.send(result(id, textResult([]byte("slow done"))))
			case <-ctx.Done():
			}
		default:
			st.send(result(id, textResult([]byte(args.Raw))))
		}
	default:
		st.send(result(id, `{}`))
	}
}

// listen serves a subscriptions/listen stream: the acknowledgment, then nothing until
// the client goes, or drop-listens closes the connection without an answer.
func (s *server) listen(ctx context.Context, w http.ResponseWriter, id string, filter gjson.Result) {
	drop := make(chan struct{})
	s.mu.Lock()
	if s.refuse {
		s.mu.Unlock()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	end := make(chan int, 1)
	s.listens[drop] = true
	s.ends[end] = true
	without := s.without
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listens, drop)
		delete(s.ends, end)
		s.mu.Unlock()
	}()
	// The filter as received, less the keys left out, each member's bytes copied.
	var b bytes.Buffer
	b.WriteByte('{')
	filter.ForEach(func(k, v gjson.Result) bool {
		for _, wo := range without {
			if k.Str == wo {
				return true
			}
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(k.Raw + ":" + v.Raw)
		return true
	})
	b.WriteByte('}')
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s},\"notifications\":%s}}\n\n", id, b.String())
	w.(http.Flusher).Flush()
	select {
	case <-ctx.Done():
	case pad := <-end:
		fmt.Fprintf(w, "data: %s\n\n", result(id, `{"pad":"`+strings.Repeat("x", pad)+`"}`))
		w.(http.Flusher).Flush()
	case <-drop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
	}
}

func (s *server) get(w http.ResponseWriter, r *http.Request) {
	if s.cfg.stateless {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if last := r.Header.Get("Last-Event-Id"); last != "" {
		s.mu.Lock()
		ev := s.broken[last]
		delete(s.broken, last)
		s.mu.Unlock()
		if ev == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(ev)
		return
	}
	s.mu.Lock()
	ss := s.sessions[r.Header.Get("Mcp-Session-Id")]
	s.mu.Unlock()
	if ss == nil {
		jsonError(w, http.StatusNotFound, -32001, "Session not found")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case msg := <-ss.push:
			fmt.Fprintf(w, "id: %s\ndata: %s\n\n", s.eventID(), msg)
			w.(http.Flusher).Flush()
		case <-ss.gone:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// serveLegacy is the HTTP+SSE transport: GET /sse is a session's stream, whose first
// event names /message?sessionId=ID; POSTs there are answered 202 and their answers
// sent on the stream.
func (s *server) serveLegacy(w http.ResponseWriter, r *http.Request, body []byte) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/sse":
		s.mu.Lock()
		s.nextSess++
		ss := &sess{id: "L" + strconv.Itoa(s.nextSess), push: make(chan []byte, 64), gone: make(chan struct{}), initialized: true}
		s.sessions[ss.id] = ss
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "event: endpoint\ndata: /message?sessionId=%s\n\n", ss.id)
		w.(http.Flusher).Flush()
		for {
			select {
			case msg := <-ss.push:
				fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
				w.(http.Flusher).Flush()
			case <-ss.gone:
				return
			case <-r.Context().Done():
				s.mu.Lock()
				delete(s.sessions, ss.id)
				s.mu.Unlock()
				return
			}
		}
	case r.Method == http.MethodPost && r.URL.Path == "/message":
		s.mu.Lock()
		ss := s.sessions[r.URL.Query().Get("sessionId")]
		s.mu.Unlock()
		if ss == nil {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		msg := gjson.ParseBytes(body)
		id := msg.Get("id")
		if id.Exists() && msg.Get("method").Str == "" {
			s.mu.Lock()
			ch := s.waiting[id.Raw]
			delete(s.waiting, id.Raw)
			s.mu.Unlock()
			if ch != nil {
				ch <- body
			}
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte("Accepted"))
		if !id.Exists() || msg.Get("method").Str == "" {
			return
		}
		go s.handle(context.Background(), &stream{s: s, sse: true, w: &legacyWriter{ss: ss}}, ss, msg, body)
	default:
		// What an old server does with a POST to its SSE URL.
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// legacyWriter turns the SSE events a stream writes into messages for the session's
// event stream.
type legacyWriter struct {
	ss  *sess
	buf bytes.Buffer
	hdr http.Header
}

func (l *legacyWriter) Header() http.Header {
	if l.hdr == nil {
		l.hdr = http.Header{}
	}
	return l.hdr
}
func (l *legacyWriter) WriteHeader(int) {}
func (l *legacyWriter) Write(p []byte) (int, error) {
	l.buf.Write(p)
	for {
		b := l.buf.Bytes()
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		ev := b[:i]
		l.buf.Next(i + 2)
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && len(d) > 0 {
				l.ss.push <- append([]byte(nil), d...)
			}
		}
	}
}
func (l *legacyWriter) Flush() {}
