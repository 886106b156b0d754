package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReviveCarriesListenStreams: a stateless-era host with 2 and 8
// subscriptions/listen streams open when its stdio server crashes (SPEC §7). Each
// stream still open is sent to the new server again, as the host wrote it, and is not
// answered with an error; the new server's acknowledgment reaches the host only when
// its filter differs from the first; and the host is then told, with the stream's id
// in _meta, that every list it listens to changed and every resource it subscribed was
// updated. A stream the host cancelled before the crash is not opened again.
func TestReviveCarriesListenStreams(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			reviveListens(t, n)
		})
	}
}

const listenMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"revive-test","version":"9"},"io.modelcontextprotocol/clientCapabilities":{}}`

// listenFilter is stream i's filter: odd ones a list and two resources, even ones two
// lists, of which the revived server drops promptsListChanged (--ack-without).
func listenFilter(i int) string {
	if i%2 == 1 {
		return fmt.Sprintf(`{"toolsListChanged":true,"resourceSubscriptions":["file:///r%d/a","file:///r%d/b"]}`, i, i)
	}
	return `{"promptsListChanged":true,"resourcesListChanged":true}`
}

// streamNote is a notification on a stream, as the host got it.
type streamNote struct {
	Method string
	Params struct {
		Meta          map[string]json.RawMessage `json:"_meta"`
		URI           string                     `json:"uri"`
		Notifications json.RawMessage            `json:"notifications"`
	} `json:"params"`
}

func (n streamNote) sid() string {
	return string(n.Params.Meta["io.modelcontextprotocol/subscriptionId"])
}

// what is the note as the tests compare it: its method, and the resource or the
// filter it is about.
func (n streamNote) what() string {
	switch {
	case n.Params.URI != "":
		return n.Method + " " + n.Params.URI
	case n.Params.Notifications != nil:
		return n.Method + " " + string(n.Params.Notifications)
	}
	return n.Method
}

func reviveListens(t *testing.T, n int) {
	f := newReviveFixture(t)
	without := filepath.Join(f.dir, "ack-without")
	s := startProxy(t, nil, f.args(nil, "--reply", "--crash-every", "1", "--exit-code", "1", "--ack-without", without)...)
	reqs := make(map[string]string)
	for i := 1; i <= n+1; i++ { // n streams, and one the host cancels before the crash
		id := fmt.Sprintf(`"L%d"`, i)
		reqs[id] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"subscriptions/listen","params":{%s,"notifications":%s}}`, id, listenMeta, listenFilter(i))
		s.Send(reqs[id])
	}
	for acked := 0; acked < n+1; {
		msg, err := s.out.Read()
		if err != nil {
			t.Fatalf("waiting for the acknowledgments: %v (stderr: %s)", err, s.Stderr.String())
		}
		var note streamNote
		if json.Unmarshal(msg, &note) != nil || note.Method != "notifications/subscriptions/acknowledged" || reqs[note.sid()] == "" {
			t.Fatalf("before the crash the host got %s, want an acknowledgment", msg)
		}
		acked++
	}
	cancelled := fmt.Sprintf(`"L%d"`, n+1)
	s.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + cancelled + `,"reason":"done"}}`)
	f.waitRecorded(t, `"requestId":`+cancelled)
	if err := os.WriteFile(without, []byte("promptsListChanged"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The call that kills the server (--crash-every 1), then a ping once it is answered.
	s.Send(`{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{` + listenMeta + `,"name":"echo","arguments":{}}}`)
	a, before := s.expect("100")
	if !isError(a) {
		t.Fatalf("the call that killed the server got %s, want an error", a)
	}
	s.Send(`{"jsonrpc":"2.0","id":101,"method":"ping","params":{` + listenMeta + `}}`)
	a, after := s.expect("101")
	if isError(a) {
		t.Fatalf("the ping after the revival got %s", a)
	}
	// What the host got after the crash, by stream: an answer to a stream is a failure.
	got := make(map[string][]string)
	for _, m := range append(before, after...) {
		if id, ok := jsonID([]byte(m)); ok {
			t.Fatalf("the host got an answer to stream %s: %s", id, m)
		}
		var note streamNote
		if err := json.Unmarshal([]byte(m), &note); err != nil {
			t.Fatal(err)
		}
		got[note.sid()] = append(got[note.sid()], note.what())
	}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf(`"L%d"`, i)
		var want []string
		if i%2 == 1 {
			// Acknowledged as first: the acknowledgment is the proxy's to keep.
			want = []string{"notifications/tools/list_changed",
				fmt.Sprintf("notifications/resources/updated file:///r%d/a", i),
				fmt.Sprintf("notifications/resources/updated file:///r%d/b", i)}
		} else {
			want = []string{`notifications/subscriptions/acknowledged {"resourcesListChanged":true}`,
				"notifications/resources/list_changed"}
		}
		if !slices.Equal(got[id], want) {
			t.Errorf("after the crash stream %s got %q, want %q", id, got[id], want)
		}
		delete(got, id)
	}
	if len(got) > 0 {
		t.Errorf("after the crash the host got more: %q", got)
	}
	// The new server received each open stream's request as the host wrote it, once,
	// and not the cancelled one.
	data, err := os.ReadFile(f.record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	crash := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `"id":100,`) })
	if crash < 0 {
		t.Fatalf("the server never received the call: %q", lines)
	}
	newGen := lines[crash+1:]
	for i := 1; i <= n+1; i++ {
		id := fmt.Sprintf(`"L%d"`, i)
		want := 1
		if i == n+1 {
			want = 0
		}
		if c := countLines(newGen, reqs[id]); c != want {
			t.Errorf("the new server received stream %s's request %d times, want %d: %q", id, c, want, newGen)
		}
	}
	if pids := f.startPids(t); len(pids) != 2 {
		t.Errorf("%d starts of the server, want 2", len(pids))
	}
}

func countLines(lines []string, s string) int {
	c := 0
	for _, l := range lines {
		if l == s {
			c++
		}
	}
	return c
}
