package upstream

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

func listenReq(id, filter string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":` + filter + `}}`
}

func listenAck(id, filter string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` + id + `},"notifications":` + filter + `}}`)
}

// fromServer is FromServer of msg, through the lexed path when lexed.
func fromServer(l *Listens, msg []byte, lexed bool) (bool, [][]byte) {
	if !lexed {
		return l.FromServer(msg, nil)
	}
	var lx jsonlex.Line
	lx.Lex(msg)
	return l.FromServer(msg, &lx)
}

func TestListensAcrossAReplacement(t *testing.T) {
	for _, lexed := range []bool{false, true} {
		t.Run(fmt.Sprint("lexed=", lexed), func(t *testing.T) {
			s := NewSetup()
			l := s.Listens()
			same := `{"toolsListChanged":true,"resourceSubscriptions":["file:///a","file:///b\u0041"]}`
			s.FromHost([]byte(listenReq("1", same)))
			s.FromHost([]byte(listenReq(`"two"`, `{"promptsListChanged":true,"resourcesListChanged":true}`)))
			s.FromHost([]byte(listenReq("3", `{"toolsListChanged":true}`)))
			s.FromHost([]byte(listenReq("4", `{"toolsListChanged":true}`)))
			if !l.Watching() || s.Era() != EraStateless {
				t.Fatalf("watching %v, era %v", l.Watching(), s.Era())
			}
			// First acknowledgments pass, and tell the host nothing more.
			for _, a := range [][]byte{listenAck("1", same), listenAck(`"two"`, `{"promptsListChanged":true,"resourcesListChanged":true}`), listenAck("3", `{}`), listenAck("4", `{}`)} {
				if pass, notes := fromServer(l, a, lexed); !pass || notes != nil {
					t.Fatalf("first acknowledgment %s: pass %v, notes %q", a, pass, notes)
				}
			}
			if l.Watching() {
				t.Fatal("still watching after every acknowledgment")
			}
			// The host cancels 3; the server ends 4 with its answer.
			s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`))
			fromServer(l, []byte(`{"jsonrpc":"2.0","id":4,"result":{"resultType":"complete"}}`), lexed)
			reqs := l.Relisten()
			if len(reqs) != 2 || string(reqs[0]) != listenReq("1", same) || !strings.Contains(string(reqs[1]), `"two"`) {
				t.Fatalf("relisten %q", reqs)
			}
			// Written again to the new server: the same stream, not a new one.
			s.FromHost(reqs[0])
			if again := l.Relisten(); !sameSlice(again[0], reqs[0]) {
				t.Fatal("the request is not the same slice each time")
			}
			pass, notes := fromServer(l, listenAck("1", same), lexed)
			want := []string{
				`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}`,
				`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"uri":"file:///a"}}`,
				`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"uri":"file:///b\u0041"}}`,
			}
			if pass || !slices.Equal(strs(notes), want) {
				t.Fatalf("same filter again: pass %v, notes %q", pass, notes)
			}
			pass, notes = fromServer(l, listenAck(`"two"`, `{"resourcesListChanged":true}`), lexed)
			if !pass || !slices.Equal(strs(notes), []string{`{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"two"}}}`}) {
				t.Fatalf("another filter: pass %v, notes %q", pass, notes)
			}
			// A second acknowledgment of an acknowledged stream is the server's business.
			if pass, notes := fromServer(l, listenAck("1", same), lexed); !pass || notes != nil {
				t.Fatalf("a repeated acknowledgment: pass %v, notes %q", pass, notes)
			}
			// Undelivered forgets them.
			l.Undelivered(l.Relisten())
			if l.Open() || l.Watching() || l.bytes != 0 {
				t.Fatalf("open %v watching %v bytes %d after Undelivered", l.Open(), l.Watching(), l.bytes)
			}
		})
	}
}

// TestListensBounded: past maxListens streams, or maxListenBytes, a listen is not
// remembered; a closed one makes room.
func TestListensBounded(t *testing.T) {
	s := NewSetup()
	l := s.Listens()
	for i := range maxListens + 10 {
		s.FromHost([]byte(listenReq(fmt.Sprint(i), `{"toolsListChanged":true}`)))
	}
	if n := len(l.Relisten()); n != maxListens {
		t.Fatalf("%d remembered, want %d", n, maxListens)
	}
	s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}`))
	s.FromHost([]byte(listenReq(`"new"`, `{}`)))
	if r := l.Relisten(); len(r) != maxListens || !strings.Contains(string(r[len(r)-1]), `"new"`) {
		t.Fatal("a cancelled stream made no room")
	}
	big := NewSetup()
	uris := `["` + strings.Repeat("u", 60<<10) + `"]`
	for i := range 40 {
		big.FromHost([]byte(listenReq(fmt.Sprint(i), `{"resourceSubscriptions":`+uris+`}`)))
	}
	if bl := big.Listens(); bl.bytes > maxListenBytes || len(bl.Relisten()) >= 40 {
		t.Fatalf("%d bytes kept, cap %d", bl.bytes, maxListenBytes)
	}
}

// FuzzListens: whatever the host and the server send, Listens never panics, keeps to
// its bounds, and every notification it makes up is JSON.
func FuzzListens(f *testing.F) {
	f.Add([]byte(listenReq("1", `{"toolsListChanged":true,"resourceSubscriptions":["a"]}`)), listenAck("1", `{"resourceSubscriptions":["a","b",1,"\u0000"]}`), []byte(`{"id":1,"result":{}}`))
	f.Add([]byte(`[`+listenReq(`"x"`, `{}`)+`,{"method":"notifications/cancelled","params":{"requestId":"x"}}]`), []byte(`[`+string(listenAck(`"x"`, `{}`))+`]`), []byte(`{`))
	f.Fuzz(func(t *testing.T, host, server, more []byte) {
		s := NewSetup()
		l := s.Listens()
		s.FromHost(host)
		for _, lexed := range []bool{false, true} {
			fromServer(l, server, lexed)
			s.FromHost(more)
			l.Relisten()
			_, notes := fromServer(l, server, lexed)
			for _, n := range notes {
				if !json.Valid(n) {
					t.Fatalf("a notification that is not JSON: %s", n)
				}
			}
			fromServer(l, more, lexed)
		}
		if l.bytes > maxListenBytes || len(l.open) > maxListens || l.bytes < 0 || l.watch.Load() < 0 {
			t.Fatalf("bytes %d, open %d, watch %d", l.bytes, len(l.open), l.watch.Load())
		}
	})
}

// sameSlice reports whether a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// TestListensAgainOneStream: Again is Relisten of one stream (a remote stream that
// broke): it says whether the stream is remembered and whether the server it leaves
// had acknowledged it, and its next acknowledgment is judged; the other streams are
// left as they are.
func TestListensAgainOneStream(t *testing.T) {
	s := NewSetup()
	l := s.Listens()
	f := `{"toolsListChanged":true}`
	s.FromHost([]byte(listenReq("1", f)))
	s.FromHost([]byte(listenReq("2", f)))
	if open, acked := l.Again([]byte("1")); !open || acked {
		t.Fatalf("before its acknowledgment: open %v, acked %v", open, acked)
	}
	for _, id := range []string{"1", "2"} {
		fromServer(l, listenAck(id, f), false)
	}
	if !l.Has([]byte("1")) || l.Has([]byte("3")) {
		t.Fatal("Has")
	}
	if open, acked := l.Again([]byte("1")); !open || !acked {
		t.Fatalf("once acknowledged: open %v, acked %v", open, acked)
	}
	if open, acked := l.Again([]byte("1")); !open || acked {
		t.Fatalf("sent again, not acknowledged since: open %v, acked %v", open, acked)
	}
	if !l.Watching() {
		t.Fatal("not watching the stream sent again")
	}
	// Its acknowledgment, unchanged, is kept back and the host told what it missed.
	if pass, notes := fromServer(l, listenAck("1", f), false); pass || len(notes) != 1 {
		t.Fatalf("acknowledgment of the stream sent again: pass %v, notes %q", pass, notes)
	}
	// The other stream was not sent again: its next acknowledgment is not judged.
	if pass, notes := fromServer(l, listenAck("2", f), false); !pass || notes != nil {
		t.Fatalf("acknowledgment of the other stream: pass %v, notes %q", pass, notes)
	}
	l.Closed([]byte("1"))
	if open, _ := l.Again([]byte("1")); open {
		t.Fatal("an ended stream is sent again")
	}
}
