package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestRemoteCarriesListenStreams: a stateless-era host with 2 and 8
// subscriptions/listen streams open over Streamable HTTP when the server drops them
// all without an answer, as a restart does (SPEC §7, as the stdio revival does:
// TestReviveCarriesListenStreams). Each stream still open is POSTed again, as the host
// wrote it, and is not answered with an error; the new acknowledgment reaches the
// host only when its filter differs from the first; and the host is then told, with
// the stream's id in _meta, that every list it listens to changed and every resource
// it subscribed was updated. A stream the host cancelled before is not opened again.
func TestRemoteCarriesListenStreams(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			remoteListens(t, raw, n)
		})
	}
}

func remoteListens(t *testing.T, raw string, n int) {
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := httpServer(t, raw, "--stateless", "--record", record)
	s := startProxy(t, nil, "--server", "rl", "--url", url, "--transport", "http")
	reqs := make(map[string]string)
	for i := 1; i <= n+1; i++ { // n streams, and one the host cancels before the drop
		id := fmt.Sprintf(`"L%d"`, i)
		reqs[id] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"subscriptions/listen","params":{%s,"notifications":%s}}`, id, listenMeta, listenFilter(i))
		s.Send(reqs[id])
	}
	for acked := 0; acked < n+1; acked++ {
		msg, err := s.out.Read()
		if err != nil {
			t.Fatalf("waiting for the acknowledgments: %v (stderr: %s)", err, s.Stderr.String())
		}
		var note streamNote
		if json.Unmarshal(msg, &note) != nil || note.Method != "notifications/subscriptions/acknowledged" || reqs[note.sid()] == "" {
			t.Fatalf("before the drop the host got %s, want an acknowledgment", msg)
		}
	}
	cancelled := fmt.Sprintf(`"L%d"`, n+1)
	s.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + cancelled + `,"reason":"done"}}`)
	// A ping after the cancel: answered, the cancel has been acted on (its stream closed).
	s.Send(`{"jsonrpc":"2.0","id":100,"method":"ping","params":{` + listenMeta + `}}`)
	if a, _ := s.expect("100"); isError(a) {
		t.Fatalf("the ping got %s", a)
	}
	// The server drops every stream; its next acknowledgments leave promptsListChanged out.
	resp, err := http.Post(strings.TrimSuffix(url, "/mcp")+"/control?cmd=drop-listens&without=promptsListChanged", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want, total := make(map[string][]string), 0
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf(`"L%d"`, i)
		if i%2 == 1 {
			// Acknowledged as first: the acknowledgment is the proxy's to keep.
			want[id] = []string{"notifications/tools/list_changed",
				fmt.Sprintf("notifications/resources/updated file:///r%d/a", i),
				fmt.Sprintf("notifications/resources/updated file:///r%d/b", i)}
		} else {
			want[id] = []string{`notifications/subscriptions/acknowledged {"resourcesListChanged":true}`,
				"notifications/resources/list_changed"}
		}
		total += len(want[id])
	}
	listenNotesAfter(t, s, want, total, "the drop", nil)
	// The server received each open stream's request as the host wrote it, twice (the
	// second time after the drop), and the cancelled one once.
	posted := make(map[string]int)
	for _, r := range recordedRequests(t, record) {
		if body, _ := r["body"].(string); r["method"] == "POST" && strings.Contains(body, `"subscriptions/listen"`) {
			id := rpcID([]byte(body))
			if body != reqs[id] {
				t.Errorf("the server got %s, the host wrote %s", body, reqs[id])
			}
			posted[id]++
		}
	}
	for i := 1; i <= n+1; i++ {
		id := fmt.Sprintf(`"L%d"`, i)
		w := 2
		if i == n+1 {
			w = 1
		}
		if posted[id] != w {
			t.Errorf("stream %s was POSTed %d times, want %d", id, posted[id], w)
		}
	}
	s.end()
}

// listenNotesAfter reads what the host gets after its streams were opened again: total
// notifications (already read ones first), then the answer to a ping; by stream, they
// must be want. An answer to a stream is a failure.
func listenNotesAfter(t *testing.T, s *testHost, want map[string][]string, total int, after string, already []string) {
	t.Helper()
	got := make(map[string][]string)
	note1 := func(m []byte) {
		if id, ok := jsonID(m); ok {
			t.Fatalf("after %s the host got an answer to stream %s: %s", after, id, m)
		}
		var note streamNote
		if err := json.Unmarshal(m, &note); err != nil {
			t.Fatal(err)
		}
		got[note.sid()] = append(got[note.sid()], note.what())
	}
	for _, m := range already {
		note1([]byte(m))
	}
	for seen := len(already); seen < total; seen++ {
		msg, err := s.out.Read() // bounded by testutil.Guard
		if err != nil {
			t.Fatalf("waiting for the streams to be opened again: %v (got %q; stderr: %s)", err, got, s.Stderr.String())
		}
		checkHostLine(t, msg)
		note1(msg)
	}
	s.Send(`{"jsonrpc":"2.0","id":101,"method":"ping","params":{` + listenMeta + `}}`)
	_, rest := s.expect("101")
	for _, m := range rest {
		note1([]byte(m))
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("after %s stream %s got %q, want %q", after, id, got[id], w)
		}
		delete(got, id)
	}
	if len(got) > 0 {
		t.Errorf("after %s the host got more: %q", after, got)
	}
}

// TestRemoteSessionCarriesListenStreams: 2 and 8 listen streams open on a session
// that expires (the server forgets it; the host's next call gets a 404). The proxy
// starts a new session for the host, and each stream still open is POSTed on it, as
// the host wrote it, instead of being answered as lost; the host is told what it may
// have missed (the acknowledgments, unchanged, are kept back).
func TestRemoteSessionCarriesListenStreams(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, restart := range []bool{false, true} {
		for _, n := range []int{2, 8} {
			name := strconv.Itoa(n)
			if restart {
				name = "restart/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				sessionListens(t, raw, n, restart)
			})
		}
	}
}

// sessionListens: with restart, the server forgets every session and drops the
// streams (a restart) instead: each stream's POST again gets the 404 that starts the
// new session.
func sessionListens(t *testing.T, raw string, n int, restart bool) {
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := httpServer(t, raw, "--record", record)
	s := startProxy(t, nil, "--server", "rl", "--url", url, "--transport", "http")
	s.Send(remoteInit)
	if a, _ := s.expect("0"); isError(a) {
		t.Fatalf("initialize: %s", a)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	reqs := make(map[string]string)
	want, total := make(map[string][]string), 0
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf(`"L%d"`, i)
		reqs[id] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"subscriptions/listen","params":{"notifications":%s}}`, id, listenFilter(i))
		s.Send(reqs[id])
		if i%2 == 1 {
			want[id] = []string{"notifications/tools/list_changed",
				fmt.Sprintf("notifications/resources/updated file:///r%d/a", i),
				fmt.Sprintf("notifications/resources/updated file:///r%d/b", i)}
		} else {
			want[id] = []string{"notifications/prompts/list_changed", "notifications/resources/list_changed"}
		}
		total += len(want[id])
	}
	for acked := 0; acked < n; acked++ {
		msg, err := s.out.Read()
		if err != nil {
			t.Fatalf("waiting for the acknowledgments: %v (stderr: %s)", err, s.Stderr.String())
		}
		var note streamNote
		if json.Unmarshal(msg, &note) != nil || note.Method != "notifications/subscriptions/acknowledged" || reqs[note.sid()] == "" {
			t.Fatalf("before the expiry the host got %s, want an acknowledgment", msg)
		}
	}
	var before []string
	if restart {
		for _, cmd := range []string{"expire-all", "drop-listens"} {
			resp, err := http.Post(strings.TrimSuffix(url, "/mcp")+"/control?cmd="+cmd, "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	} else {
		// The session expires; the next call gets a 404, is sent again on a new
		// session and answered.
		s.Send(`{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"expire","arguments":{}}}`)
		if a, _ := s.expect("100"); isError(a) {
			t.Fatalf("the expiring call got %s", a)
		}
		s.Send(`{"jsonrpc":"2.0","id":102,"method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`)
		var a string
		if a, before = s.expect("102"); isError(a) {
			t.Fatalf("the call after the expiry got %s", a)
		}
	}
	listenNotesAfter(t, s, want, total, "the expiry", before)
	// Each stream went to the new session (s2) as the host wrote it, once.
	posted := make(map[string]int)
	for _, r := range recordedRequests(t, record) {
		h, _ := r["header"].(map[string]any)
		if body, _ := r["body"].(string); r["method"] == "POST" && h["Mcp-Session-Id"] == "s2" && strings.Contains(body, `"subscriptions/listen"`) {
			id := rpcID([]byte(body))
			if body != reqs[id] {
				t.Errorf("the new session got %s, the host wrote %s", body, reqs[id])
			}
			posted[id]++
		}
	}
	for id := range reqs {
		if posted[id] != 1 {
			t.Errorf("stream %s was POSTed %d times on the new session, want 1", id, posted[id])
		}
	}
	s.end()
}

// TestRemoteListenStreamsGiveUp: 2 and 8 listen streams that the server drops and
// then refuses (HTTP 503 to every listen, a server that stays down for them). Each
// is POSTed again a bounded number of times (5 in a row without an acknowledgment),
// then answered with an error, once; the session goes on. A new stream the server
// refuses is answered at once, as any failed request.
func TestRemoteListenStreamsGiveUp(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			listensGiveUp(t, raw, n)
		})
	}
}

func listensGiveUp(t *testing.T, raw string, n int) {
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := httpServer(t, raw, "--stateless", "--record", record)
	s := startProxy(t, nil, "--server", "rl", "--url", url, "--transport", "http")
	for i := 1; i <= n; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"subscriptions/listen","params":{%s,"notifications":%s}}`, i, listenMeta, listenFilter(i)))
	}
	for acked := 0; acked < n; acked++ {
		if _, err := s.out.Read(); err != nil {
			t.Fatalf("waiting for the acknowledgments: %v (stderr: %s)", err, s.Stderr.String())
		}
	}
	resp, err := http.Post(strings.TrimSuffix(url, "/mcp")+"/control?cmd=drop-listens&refuse=1", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	answered := make(map[string]int)
	for len(answered) < n {
		msg, err := s.out.Read() // bounded by testutil.Guard
		if err != nil {
			t.Fatalf("waiting for the streams to be given up: %v (answered %v; stderr: %s)", err, answered, s.Stderr.String())
		}
		id, ok := jsonID(msg)
		if !ok || !isError(string(msg)) || !strings.Contains(string(msg), "503") {
			t.Fatalf("the host got %s, want an error naming the 503", msg)
		}
		answered[id]++
	}
	s.Send(`{"jsonrpc":"2.0","id":101,"method":"ping","params":{` + listenMeta + `}}`)
	if a, before := s.expect("101"); isError(a) || len(before) > 0 {
		t.Fatalf("after giving up the host got %q, then %s", before, a)
	}
	// A new stream that no server takes is the host's failed request: answered at
	// once, POSTed once.
	s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"N","method":"subscriptions/listen","params":{%s,"notifications":%s}}`, listenMeta, listenFilter(1)))
	if a, before := s.expect(`"N"`); !isError(a) || len(before) > 0 {
		t.Fatalf("a new stream the server refuses got %q, then %s", before, a)
	}
	posted := make(map[string]int)
	for _, r := range recordedRequests(t, record) {
		if body, _ := r["body"].(string); r["method"] == "POST" && strings.Contains(body, `"subscriptions/listen"`) {
			posted[rpcID([]byte(body))]++
		}
	}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf(`"L%d"`, i)
		if answered[id] != 1 || posted[id] != 1+5 {
			t.Errorf("stream %s: answered %d times, POSTed %d times; want 1 and 6", id, answered[id], posted[id])
		}
	}
	if posted[`"N"`] != 1 {
		t.Errorf("the new stream was POSTed %d times, want 1", posted[`"N"`])
	}
	s.end()
}

// TestRemoteListenEndedByALongAnswer: a server that ends each of 64 listen streams
// with an answer over 64 KiB (a result the connection's cheap scan does not read),
// then drops the 2 and 8 streams the host opens next. Every stream it answered has
// ended, so the later ones are remembered and POSTed again (TestRemoteCarriesListenStreams),
// not answered with an error: the 64 answered ones were kept as open before, filling
// the bound on streams remembered (maxListens), and each later stream got "the server
// ended the stream before answering".
func TestRemoteListenEndedByALongAnswer(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			listenEndedLong(t, raw, n)
		})
	}
}

func listenEndedLong(t *testing.T, raw string, n int) {
	url := httpServer(t, raw, "--stateless")
	control := strings.TrimSuffix(url, "/mcp") + "/control?cmd="
	post := func(cmd string) {
		resp, err := http.Post(control+cmd, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s := startProxy(t, nil, "--server", "rl", "--url", url, "--transport", "http")
	open := func(prefix string, k int) {
		for i := 1; i <= k; i++ {
			s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"%s%d","method":"subscriptions/listen","params":{%s,"notifications":%s}}`, prefix, i, listenMeta, listenFilter(i)))
		}
		for acked := 0; acked < k; acked++ {
			msg, err := s.out.Read()
			if err != nil {
				t.Fatalf("waiting for the acknowledgments: %v (stderr: %s)", err, s.Stderr.String())
			}
			var note streamNote
			if json.Unmarshal(msg, &note) != nil || note.Method != "notifications/subscriptions/acknowledged" {
				t.Fatalf("the host got %.200s, want an acknowledgment", msg)
			}
		}
	}
	const ended = 64
	open("E", ended)
	post("end-listens&pad=70000")
	for got := 0; got < ended; got++ {
		msg, err := s.out.Read()
		if err != nil {
			t.Fatalf("waiting for the answers: %v (stderr: %s)", err, s.Stderr.String())
		}
		if id, ok := jsonID(msg); !ok || !strings.HasPrefix(id, `"E`) || isError(string(msg)) || len(msg) < 70000 {
			t.Fatalf("the host got %.200s, want a long answer to a stream", msg)
		}
	}
	open("X", n)
	post("drop-listens")
	// Each stream is POSTed again: the host gets what it may have missed on each, and
	// no answer.
	told := make(map[string]bool)
	for len(told) < n {
		msg, err := s.out.Read() // bounded by testutil.Guard
		if err != nil {
			t.Fatalf("after the drop: %v (told %v; stderr: %s)", err, told, s.Stderr.String())
		}
		if id, ok := jsonID(msg); ok {
			t.Fatalf("stream %s was answered: %.300s", id, msg)
		}
		var note streamNote
		if json.Unmarshal(msg, &note) != nil || !strings.HasPrefix(note.sid(), `"X`) {
			t.Fatalf("after the drop the host got %.200s", msg)
		}
		told[note.sid()] = true
	}
	s.end()
}

// TestRemoteListenIDReusedWhileWaiting: a listen stream the server dropped waits to be
// POSTed again (relisten, at least 250 ms); meanwhile the host cancels it and uses its
// id for a tools/call, as JSON-RPC lets it once the first request is done. The
// cancelled stream must not be POSTed again: it was, in the call's place (the call's
// entry was found by id), and the host got an acknowledgment of the stream it had
// cancelled before the call's answer.
func TestRemoteListenIDReusedWhileWaiting(t *testing.T) {
	raw := testutil.Build(t, "./testdata/rawhttp")
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			listenIDReused(t, raw, n)
		})
	}
}

func listenIDReused(t *testing.T, raw string, n int) {
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	url := httpServer(t, raw, "--stateless", "--record", record)
	s := startProxy(t, nil, "--server", "rl", "--url", url, "--transport", "http", "--log-level", "debug")
	for i := 1; i <= n; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"subscriptions/listen","params":{%s,"notifications":%s}}`, i, listenMeta, listenFilter(i)))
	}
	for acked := 0; acked < n; acked++ {
		if _, err := s.out.Read(); err != nil {
			t.Fatalf("waiting for the acknowledgments: %v (stderr: %s)", err, s.Stderr.String())
		}
	}
	resp, err := http.Post(strings.TrimSuffix(url, "/mcp")+"/control?cmd=drop-listens", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := s.Stderr.WaitUntil(testutil.Context(t), func(text string) bool {
		return strings.Count(text, "opening it again") >= n
	}); err != nil {
		t.Fatalf("the streams were not to be POSTed again: %v (stderr: %s)", err, s.Stderr.String())
	}
	for i := 1; i <= n; i++ {
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L%d","reason":"done"}}`, i))
		s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"L%d","method":"tools/call","params":{%s,"name":"slow","arguments":{"ms":1500}}}`, i, listenMeta))
	}
	answered := make(map[string]bool)
	for len(answered) < n {
		msg, err := s.out.Read() // bounded by testutil.Guard
		if err != nil {
			t.Fatalf("waiting for the calls: %v (stderr: %s)", err, s.Stderr.String())
		}
		id, ok := jsonID(msg)
		if !ok || isError(string(msg)) || !strings.Contains(string(msg), "slow done") {
			t.Fatalf("after the cancels the host got %.300s, want the calls' answers", msg)
		}
		answered[id] = true
	}
	posted := make(map[string]int)
	for _, r := range recordedRequests(t, record) {
		if body, _ := r["body"].(string); r["method"] == "POST" && strings.Contains(body, `"subscriptions/listen"`) {
			posted[rpcID([]byte(body))]++
		}
	}
	for i := 1; i <= n; i++ {
		if id := fmt.Sprintf(`"L%d"`, i); posted[id] != 1 {
			t.Errorf("the cancelled stream %s was POSTed %d times, want 1", id, posted[id])
		}
	}
	s.end()
}
