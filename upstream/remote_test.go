package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// wait is the deadline of every wait in these tests.
const wait = 20 * time.Second

// rawHTTP starts the rawhttp fixture with args and returns its URL and the file its
// requests are recorded in.
func rawHTTP(t *testing.T, args ...string) (url, record string) {
	t.Helper()
	bin := testutil.Build(t, "./testdata/rawhttp")
	record = filepath.Join(t.TempDir(), "requests.jsonl")
	return testutil.HTTPFixture(t, bin, append([]string{"--record", record}, args...)...), record
}

// waitRequest waits until the server has recorded a request whose body holds sub.
func waitRequest(t *testing.T, record, sub string) {
	t.Helper()
	testutil.Eventually(t, "the server to receive "+sub, func() bool {
		for _, r := range requests(t, record) {
			if strings.Contains(r.Body, sub) {
				return true
			}
		}
		return false
	})
}

type recorded = testutil.Recorded

func requests(t *testing.T, record string) []recorded { return testutil.RecordedRequests(t, record) }

// client is a Conn under test with its messages read into a channel.
type client struct {
	t    *testing.T
	c    *remoteConn
	msgs chan []byte
	log  *testutil.SyncBuffer
	// ended gets how the session ended, when it does.
	ended chan *SessionEndedError
}

func dial(t *testing.T, r Remote) *client {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	if r.Logger == nil {
		r.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if r.Name == "" {
		r.Name = "fixture"
	}
	if r.CloseGrace == 0 {
		r.CloseGrace = 500 * time.Millisecond
	}
	sh, err := newRemoteShared(r)
	if err != nil {
		t.Fatal(err)
	}
	c := newRemote(sh)
	cl := &client{t: t, c: c, msgs: make(chan []byte, 1024), log: logs, ended: make(chan *SessionEndedError, 1)}
	go func() {
		defer close(cl.msgs)
		for {
			m, err := c.Read()
			var se *SessionEndedError
			if errors.As(err, &se) {
				cl.ended <- se // the connection is done, as a child that exited
				return
			}
			if ue, ok := IsUnanswered(err); ok {
				// As the relay does: each id gets an error answer with the reason.
				for _, id := range ue.IDs {
					cl.msgs <- jsonlex.ErrorResponse(id, -32000, ue.Reason)
				}
				continue
			}
			if err != nil {
				return
			}
			cl.msgs <- m
		}
	}()
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { c.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("Close did not return within %s", wait)
		}
	})
	return cl
}

func (cl *client) write(msg string) {
	cl.t.Helper()
	if err := cl.c.Write([]byte(msg)); err != nil {
		cl.t.Fatalf("Write: %v", err)
	}
}

// next returns the next message from the server.
func (cl *client) next() string {
	cl.t.Helper()
	select {
	case m, ok := <-cl.msgs:
		if !ok {
			cl.t.Fatal("the connection ended")
		}
		return string(m)
	case <-time.After(wait):
		cl.t.Fatalf("no message within %s; log:\n%s", wait, cl.log)
		return ""
	}
}

// until returns the first message containing sub, skipping others.
func (cl *client) until(sub string) string {
	cl.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case m, ok := <-cl.msgs:
			if !ok {
				cl.t.Fatalf("the connection ended before a message with %q", sub)
			}
			if strings.Contains(string(m), sub) {
				return string(m)
			}
		case <-deadline:
			cl.t.Fatalf("no message with %q within %s; log:\n%s", sub, wait, cl.log)
		}
	}
}

// all waits for a message containing each of subs, in any order.
func (cl *client) all(subs ...string) {
	cl.t.Helper()
	left := map[string]bool{}
	for _, s := range subs {
		left[s] = true
	}
	deadline := time.After(wait)
	for len(left) > 0 {
		select {
		case m, ok := <-cl.msgs:
			if !ok {
				cl.t.Fatalf("the connection ended still waiting for %v", left)
			}
			for s := range left {
				if strings.Contains(string(m), s) {
					delete(left, s)
				}
			}
		case <-deadline:
			cl.t.Fatalf("still waiting for %v after %s; log:\n%s", left, wait, cl.log)
		}
	}
}

const initReq = `{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}},"jsonrpc":"2.0","id":0}`

func (cl *client) handshake() {
	cl.t.Helper()
	cl.write(initReq)
	cl.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if got := cl.next(); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		cl.t.Fatalf("initialize answer: %s", got)
	}
}

func TestStreamableBytesBothAnswerKinds(t *testing.T) {
	for _, answer := range []string{"json", "sse"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			url, record := rawHTTP(t, "--answer", answer)
			cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
			cl.handshake()
			// Sent before the initialize answer could arrive: held until it did (the
			// fixture, like the official servers, refuses it otherwise).
			call := `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"echo","arguments":{"z":1,"a":"é\u00e9","n":1.50},"x-unknown":[true]}}`
			cl.write(call)
			cl.write(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
			// Two POSTs in flight: their answers may come in either order.
			a, b := cl.next(), cl.next()
			if strings.Contains(a, `"id":null`) {
				a, b = b, a
			}
			want := `{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":[{"type":"text","text":"{\"z\":1,\"a\":\"é\\u00e9\",\"n\":1.50}"}]}}`
			if a != want {
				t.Fatalf("answer\n got %s\nwant %s", a, want)
			}
			if !strings.HasPrefix(b, `{"jsonrpc":"2.0","id":null,"result":`) {
				t.Fatalf("id null answer: %s", b)
			}
			var seen bool
			for _, r := range requests(t, record) {
				if r.Body == call {
					seen = true
					if r.Header["Mcp-Session-Id"] != "s1" || r.Header["Mcp-Protocol-Version"] != "2025-11-25" {
						t.Errorf("headers of the call: %v", r.Header)
					}
					if r.Header["Accept"] != "application/json, text/event-stream" || r.Header["Content-Type"] != "application/json" {
						t.Errorf("accept/content-type of the call: %v", r.Header)
					}
				}
				if strings.Contains(r.Body, `"initialize"`) && (r.Header["Mcp-Session-Id"] != "" || r.Header["Mcp-Protocol-Version"] != "") {
					t.Errorf("initialize carried session headers: %v", r.Header)
				}
			}
			if !seen {
				t.Errorf("the server never received the call's exact bytes; it got:\n%v", requests(t, record))
			}
		})
	}
}

func TestStreamableHugeAnswers(t *testing.T) {
	for _, answer := range []string{"json", "sse"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			url, _ := rawHTTP(t, "--answer", answer)
			cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
			cl.handshake()
			cl.write(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{"bytes":52428800}}}`)
			got := cl.next()
			if len(got) < 50<<20 || !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":"big","result":{"content":[{"type":"text","text":"yyyy`) || !strings.HasSuffix(got, `yyy"}]}}`) {
				t.Fatalf("a 50 MB answer came out as %d bytes: %.100s…", len(got), got)
			}
		})
	}
}

func TestStreamableOnePrettyAnswerIsOneLine(t *testing.T) {
	t.Parallel()
	url, _ := rawHTTP(t, "--pretty")
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
	cl.write(initReq)
	got := cl.next()
	if strings.ContainsAny(got, "\r\n") || !json.Valid([]byte(got)) || !strings.Contains(got, `"id": 0,`) {
		t.Fatalf("a multi-line JSON answer must reach the host as one valid line: %q", got)
	}
}

// TestStreamableWriteNeverWaits: a call answered only when its tool finishes must not
// hold up the next one.
func TestStreamableWriteNeverWaits(t *testing.T) {
	t.Parallel()
	url, _ := rawHTTP(t)
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
	cl.handshake()
	cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":3000}}}`)
	start := time.Now()
	cl.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"k":2}}}`)
	if got := cl.next(); !strings.Contains(got, `"id":2`) {
		t.Fatalf("the quick call should be answered first, got %s", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the quick call waited %s behind the slow one", d)
	}
	if got := cl.next(); !strings.Contains(got, `"id":1`) {
		t.Fatalf("then the slow one: %s", got)
	}
}

func TestStreamableServerRequestsAndGETStream(t *testing.T) {
	for _, answer := range []string{"json", "sse"} {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			url, record := rawHTTP(t, "--answer", answer)
			cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
			cl.handshake()
			// With JSON answers the server's request comes on the GET stream; with
			// SSE, on the call's own stream. Either way the host answers it.
			cl.write(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sample","arguments":{}}}`)
			req := cl.until(`"sampling/createMessage"`)
			if !strings.Contains(req, `"id":"srv-1"`) {
				t.Fatalf("server request: %s", req)
			}
			answer := `{"jsonrpc":"2.0","id":"srv-1","result":{"model":"m","role":"assistant","content":{"type":"text","text":"ok"},"x":1}}`
			cl.write(answer)
			got := cl.until(`"id":5`)
			if !strings.Contains(got, `{\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"result\":{\"model\":\"m\"`) {
				t.Fatalf("the server did not get the host's answer unchanged: %s", got)
			}
			cl.write(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"push","arguments":{"level":"info","data":"hi"}}}`)
			cl.all(`"method":"notifications/message","params":{"level":"info","data":"hi"}`, `"id":6`)
			gets := 0
			for _, r := range requests(t, record) {
				if r.Method == http.MethodGet && r.Header["Mcp-Session-Id"] == "s1" {
					gets++
				}
			}
			if gets == 0 {
				t.Errorf("no GET stream was opened")
			}
		})
	}
}

// TestStreamableSessionExpiryEndsTheConnection: a connection is one session. When the
// server forgets it (a 404 for its id), Read returns what came before, then a
// SessionEndedError carrying the calls the 404s refused, unrun, in the order written,
// for the next session (revive's renew_test carries them there); Write fails as on a
// closed pipe. With 2 and 8 calls written at once, none is lost or carried twice.
func TestStreamableSessionExpiryEndsTheConnection(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			url, record := rawHTTP(t)
			cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
			cl.handshake()
			cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
			cl.until(`"id":1`)
			var calls []string
			for i := range n {
				calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"after":"expiry"}}}`, 10+i))
				if err := cl.c.Write([]byte(calls[i])); err != nil && !errors.Is(err, io.ErrClosedPipe) {
					t.Fatalf("Write: %v", err)
				}
			}
			var se *SessionEndedError
			select {
			case se = <-cl.ended:
			case m := <-cl.msgs:
				t.Fatalf("after the expiry the connection read %s, want its end", m)
			case <-time.After(wait):
				t.Fatalf("the connection did not end; log:\n%s", cl.log)
			}
			if !strings.Contains(se.Reason, "session expired (HTTP 404)") {
				t.Errorf("the end says %q", se.Reason)
			}
			// Every call is refused unrun (the server 404s each), or was never sent
			// (written after the end: Write failed); none is carried twice, and they
			// keep their order.
			carried := map[string]int{}
			last := -1
			for _, m := range se.Msgs {
				i := slices.Index(calls, string(m))
				if i < 0 {
					t.Fatalf("the end carries %s, not a call written", m)
				}
				if i < last {
					t.Errorf("the carried calls are out of order: %d after %d", i, last)
				}
				last = i
				carried[string(m)]++
			}
			if len(se.Msgs) == 0 {
				t.Error("the end carries no call: the first one's 404 refused it")
			}
			for m, k := range carried {
				if k > 1 {
					t.Errorf("%s carried %d times", m, k)
				}
			}
			for _, r := range requests(t, record) {
				if strings.Contains(r.Body, `"echo"`) && r.Header["Mcp-Session-Id"] != "s1" {
					t.Errorf("a call went to session %q", r.Header["Mcp-Session-Id"])
				}
			}
			if err := cl.c.Write([]byte(calls[0])); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("a Write after the end: %v, want a closed pipe", err)
			}
		})
	}
}

func TestStreamableResumesWithLastEventID(t *testing.T) {
	t.Parallel()
	url, record := rawHTTP(t, "--answer", "sse")
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
	cl.handshake()
	cl.write(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"break","arguments":{}}}`)
	cl.until(`"notifications/progress"`)
	if got := cl.until(`"id":7`); !strings.Contains(got, `resumed`) {
		t.Fatalf("resumed answer: %s", got)
	}
	found := false
	for _, r := range requests(t, record) {
		if r.Method == http.MethodGet && r.Header["Last-Event-Id"] != "" {
			found = true
		}
	}
	if !found {
		t.Fatal("no GET with Last-Event-ID")
	}
}

func TestStreamableDeleteOnClose(t *testing.T) {
	t.Parallel()
	url, record := rawHTTP(t)
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
	cl.handshake()
	cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	cl.until(`"id":1`)
	cl.c.Close()
	for _, r := range requests(t, record) {
		if r.Method == http.MethodDelete && r.Header["Mcp-Session-Id"] == "s1" {
			return
		}
	}
	t.Fatal("no DELETE of the session")
}

func TestStatelessHeaders(t *testing.T) {
	t.Parallel()
	url, record := rawHTTP(t, "--stateless")
	cl := dial(t, Remote{URL: url})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"h","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	cl.write(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{` + meta + `}}`)
	cl.until(`"id":"d"`)
	cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`)
	cl.until(`"id":1`)
	cl.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"route","arguments":{"region":"us-west1","n":42,"q":"x"},` + meta + `}}`)
	cl.until(`"id":2`)
	cl.write(`{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///é","` + meta[1:] + `}}`)
	cl.until(`"id":3`)
	byID := map[string]recorded{}
	for _, r := range requests(t, record) {
		if r.Header["Mcp-Session-Id"] != "" {
			t.Errorf("a stateless request carried a session id: %v", r.Header)
		}
		for _, id := range []string{`"d"`, `1`, `2`, `3`} {
			if strings.Contains(r.Body, `"id":`+id+`,`) {
				byID[id] = r
			}
		}
	}
	check := func(id, h, want string) {
		t.Helper()
		if got := byID[id].Header[h]; got != want {
			t.Errorf("request %s: %s = %q, want %q (all: %v)", id, h, got, want, byID[id].Header)
		}
	}
	check(`"d"`, "Mcp-Protocol-Version", "2026-07-28")
	check(`"d"`, "Mcp-Method", "server/discover")
	check(`1`, "Mcp-Method", "tools/list")
	check(`2`, "Mcp-Name", "route")
	check(`2`, "Mcp-Param-Region", "us-west1")
	check(`2`, "Mcp-Param-N", "42")
	check(`2`, "Mcp-Param-Q", "")
	check(`3`, "Mcp-Name", "=?base64?ZmlsZTovLy/DqQ==?=")
	for _, r := range requests(t, record) {
		if r.Method == http.MethodGet {
			t.Errorf("the stateless era has no GET stream, but one was opened")
		}
	}
}

func TestStatelessCancelClosesTheStream(t *testing.T) {
	t.Parallel()
	url, record := rawHTTP(t, "--stateless", "--answer", "sse")
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{},` + meta + `}}`)
	waitRequest(t, record, `"hang"`) // the call's stream is what the cancel must close
	cl.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	cl.write(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta + `}}`)
	if got := cl.next(); !strings.Contains(got, `"id":2`) {
		t.Fatalf("after a cancel the host must get nothing for the cancelled call, got %s", got)
	}
	for _, r := range requests(t, record) {
		if strings.Contains(r.Body, "notifications/cancelled") {
			t.Errorf("the stateless era cancels by closing the stream; the notification was POSTed too")
		}
	}
	testutil.Eventually(t, "the server to see the cancelled request's stream closed", func() bool {
		for _, r := range requests(t, record) {
			if r.Method == "EVENT" && r.Path == "closed" && r.Body == "1" {
				return true
			}
		}
		return false
	})
}

func TestLegacySSEViaAuto(t *testing.T) {
	t.Parallel()
	url, _ := rawHTTP(t, "--legacy")
	cl := dial(t, Remote{URL: url})
	cl.handshake()
	call := `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"echo","arguments":{"b":2,"a":1}}}`
	cl.write(call)
	if got := cl.next(); got != `{"jsonrpc":"2.0","id":9007199254740993,"result":{"content":[{"type":"text","text":"{\"b\":2,\"a\":1}"}]}}` {
		t.Fatalf("legacy answer: %s", got)
	}
	cl.write(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sample","arguments":{}}}`)
	cl.until(`"sampling/createMessage"`)
	cl.write(`{"jsonrpc":"2.0","id":"srv-1","result":{"model":"m"}}`)
	if got := cl.until(`"id":5`); !strings.Contains(got, `\"model\":\"m\"`) {
		t.Fatalf("sample over legacy: %s", got)
	}
	if !strings.Contains(cl.log.String(), "HTTP+SSE") {
		t.Errorf("the fallback was not logged:\n%s", cl.log)
	}
}

func TestNetworkFailureAnswersAtOnce(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/mcp?token=querysecret"
	srv.Close()
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP, Name: "gone"})
	start := time.Now()
	cl.write(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"echo"}}`)
	got := cl.next()
	if !strings.Contains(got, `"id":"x","error":{"code":-32000`) || !strings.Contains(got, "server gone") || !strings.Contains(got, "refused") {
		t.Fatalf("answer: %s", got)
	}
	if strings.Contains(got, "querysecret") || strings.Contains(cl.log.String(), "querysecret") {
		t.Fatalf("a query secret leaked: %s\n%s", got, cl.log)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the error took %s", d)
	}
	cl.write(`{"jsonrpc":"2.0","id":"y","method":"ping"}`)
	if got := cl.next(); !strings.Contains(got, `"id":"y","error"`) {
		t.Fatalf("the next call tries again and fails again: %s", got)
	}
}

func TestAuthRefusedIsSaidOnce(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "bad token %s", r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	h := http.Header{}
	h.Set("Authorization", "Bearer sk-very-secret-value")
	cl := dial(t, Remote{URL: srv.URL, Transport: TransportHTTP, Header: h, Name: "locked"})
	for i := range 3 {
		cl.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i))
		got := cl.next()
		if !strings.Contains(got, "401") || !strings.Contains(got, "server locked") {
			t.Fatalf("answer: %s", got)
		}
		if strings.Contains(got, "very-secret") {
			t.Fatalf("the header value leaked into the answer: %s", got)
		}
	}
	logs := cl.log.String()
	if n := strings.Count(logs, "refused the credentials (HTTP 401"); n != 1 {
		t.Errorf("the 401 was said %d times:\n%s", n, logs)
	}
	if strings.Contains(logs, "very-secret") {
		t.Errorf("the header value leaked into the log:\n%s", logs)
	}
}

func TestRefusedJSONRPCErrorGetsTheID(t *testing.T) {
	t.Parallel()
	url, _ := rawHTTP(t)
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP})
	// No session: the fixture answers 400 with a JSON-RPC error whose id is null.
	cl.write(`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	want := `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":"early"}`
	if got := cl.next(); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

// Not parallel: the goroutine check at its end must not see other tests' connections.
func TestCloseIsBounded(t *testing.T) {
	url, record := rawHTTP(t)
	cl := dial(t, Remote{URL: url, Transport: TransportHTTP, CloseGrace: 300 * time.Millisecond})
	cl.handshake()
	cl.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	waitRequest(t, record, `"hang"`) // the call in flight when Close comes
	start := time.Now()
	cl.c.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %s with a call in flight", d)
	}
	if _, err := cl.c.Read(); err != io.EOF {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := cl.c.Write([]byte(`{}`)); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	// Everything the connection started has ended (the streams' readers, the sender,
	// the GET stream), not only what a test happens to wait for.
	testutil.NoGoroutines(t, "upstream.(*remoteConn)", "upstream.(*streamableHTTP)", "upstream.(*legacySSE)", "upstream.(*exchangePool)")
}

// TestLegacyStreamLostEndsTheSession: an HTTP+SSE server that drops its streams (a
// restart) loses the session with them; the connection ends, saying so (revive's
// renew_test sets the next session up).
func TestLegacyStreamLostEndsTheSession(t *testing.T) {
	t.Parallel()
	url, _ := rawHTTP(t, "--legacy")
	cl := dial(t, Remote{URL: url, Transport: TransportSSE})
	cl.handshake()
	resp, err := http.Post(strings.TrimSuffix(url, "/sse")+"/control?cmd=expire-all", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case se := <-cl.ended:
		if !strings.Contains(se.Reason, "event stream ended") || len(se.Msgs) != 0 {
			t.Errorf("the end says %q, carrying %q", se.Reason, se.Msgs)
		}
	case <-time.After(wait):
		t.Fatalf("the connection did not end; log:\n%s", cl.log)
	}
}

// TestAnswersReadAtOnceShareTheCap: answer bodies read at once draw on one budget of
// the cap (readBodyIn), past each body's first freeBody bytes: a second large body
// that would pass it is refused, a small one is not, and a body given back makes room.
func TestAnswersReadAtOnceShareTheCap(t *testing.T) {
	const capBytes = 1 << 20
	b := newBudget(capBytes)
	big := func() io.Reader { return struct{ io.Reader }{strings.NewReader(strings.Repeat("a", 900<<10))} } // no length: chunked
	first, held, err := readBodyIn(big(), -1, capBytes, b)
	// What is held is what was allocated for it (chunks doubling), past freeBody.
	if err != nil || len(first) != 900<<10 || held < 900<<10-freeBody || held > capBytes {
		t.Fatalf("the first body: %d bytes, %d held, %v", len(first), held, err)
	}
	var be *budgetError
	if _, _, err := readBodyIn(big(), -1, capBytes, b); !errors.As(err, &be) {
		t.Fatalf("a second body over what is left: %v, want a budgetError", err)
	}
	if _, _, err := readBodyIn(strings.NewReader(strings.Repeat("s", 10<<10)), 10<<10, capBytes, b); err != nil {
		t.Fatalf("a small body while the budget is spent: %v", err)
	}
	b.give(held)
	if _, held, err := readBodyIn(big(), -1, capBytes, b); err != nil || held < 900<<10-freeBody {
		t.Fatalf("a body once the first was given back: %d held, %v", held, err)
	}
}
