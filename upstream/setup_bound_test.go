package upstream

import (
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

func subscribeReq(id, uri string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"resources/subscribe","params":{"uri":"` + uri + `"}}`)
}

// TestSetupBoundEvictsTheOldestNotAReusedID: an id the host used for a setup request
// that was answered (or cancelled), then used again, left its first key at the head of
// order: once maxSetupAwaited were held, that stale key evicted the newest request
// (the one reusing the id) instead of the oldest, and the subscribe the host had just
// made was not replayed to a revived server.
func TestSetupBoundEvictsTheOldestNotAReusedID(t *testing.T) {
	for _, how := range []string{"answered", "cancelled"} {
		t.Run(how, func(t *testing.T) {
			s := NewSetup()
			hostSession(s)
			s.FromHost(subscribeReq(`"r"`, "file:///first"))
			if how == "answered" {
				s.FromServer([]byte(`{"jsonrpc":"2.0","id":"r","error":{"code":-1,"message":"no"}}`))
			} else {
				s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r"}}`))
			}
			for i := range maxSetupAwaited - 1 {
				s.FromHost(subscribeReq(strconv.Itoa(1000+i), "file:///old"))
			}
			// The newest: the reused id.
			s.FromHost(subscribeReq(`"r"`, "file:///newest"))
			// One more: the oldest still awaited (id 1000) must go, not "r".
			s.FromHost(subscribeReq(`"last"`, "file:///last"))
			s.FromServer([]byte(`{"jsonrpc":"2.0","id":"r","result":{}}`))
			found := false
			for _, sub := range s.subs {
				found = found || sub.uri == "file:///newest"
			}
			if !found {
				t.Fatalf("the newest subscribe (a reused id) was evicted before older ones: subs %v", s.subs)
			}
			if n := int(s.waiting.Load()); n != len(s.pending) {
				t.Fatalf("waiting %d, pending %d", n, len(s.pending))
			}
		})
	}
}

// FuzzSetupAwaitedModel drives Setup's awaited requests (ask, answer, cancel, Lost)
// from a small alphabet of ids and holds them to a model: the newest maxSetupAwaited
// (by when each was first asked since last settled) are the ones kept, waiting is
// always len(pending), and order stays bounded.
func FuzzSetupAwaitedModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x00, 0x40, 0x00, 0x80, 0x00, 0xc1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := NewSetup()
		var model []string // keys pending, oldest first
		idText := func(b byte) string {
			v := int(b & 0x3f)
			switch v % 3 { // spelled three ways: the same id as 7 and 7.0, another as "7"
			case 0:
				return strconv.Itoa(v * 3)
			case 1:
				return strconv.Itoa(v*3) + ".0"
			}
			return `"` + strconv.Itoa(v) + `"`
		}
		for i, op := range ops {
			id := idText(op)
			k := jsonlex.IDKey([]byte(id))
			// Ops repeated so that more than maxSetupAwaited are asked from few bytes.
			reps := 1
			if op&0xc0 == 0 && i%4 == 0 {
				reps = 0
				for j := range 40 {
					jid := strconv.Itoa(1000 + int(op)*40 + j + i*1000)
					s.FromHost(subscribeReq(jid, "u"))
					jk := jsonlex.IDKey([]byte(jid))
					if !slices.Contains(model, jk) {
						model = append(model, jk)
					}
					for len(model) > maxSetupAwaited {
						model = model[1:]
					}
				}
			}
			for range reps {
				switch op >> 6 {
				case 0:
					s.FromHost(subscribeReq(id, "u"))
					if !slices.Contains(model, k) {
						model = append(model, k)
					}
					if len(model) > maxSetupAwaited {
						model = model[1:]
					}
				case 1:
					s.FromServer([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`))
					model = slices.DeleteFunc(model, func(m string) bool { return m == k })
				case 2:
					s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`))
					model = slices.DeleteFunc(model, func(m string) bool { return m == k })
				case 3:
					if op&1 == 1 {
						s.Lost()
						model = model[:0]
					} else {
						s.FromHost([]byte(`[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}},{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}]`))
						model = slices.DeleteFunc(model, func(m string) bool { return m == k })
						model = append(model, k)
						if len(model) > maxSetupAwaited {
							model = model[1:]
						}
					}
				}
			}
			s.mu.Lock()
			if int(s.waiting.Load()) != len(s.pending) {
				t.Fatalf("op %d: waiting %d, pending %d", i, s.waiting.Load(), len(s.pending))
			}
			if len(s.order) > 2*maxSetupAwaited+1 {
				t.Fatalf("op %d: order holds %d keys", i, len(s.order))
			}
			got := make([]string, 0, len(s.pending))
			for k := range s.pending {
				got = append(got, k)
			}
			s.mu.Unlock()
			want := slices.Clone(model)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("op %d: pending %q, the newest asked are %q", i, got, want)
			}
		}
	})
}

// TestSetupConcurrentAwaited: FromHost on several goroutines (asks and cancels) and
// FromServer on another keep waiting equal to len(pending) (run with -race).
func TestSetupConcurrentAwaited(t *testing.T) {
	s := NewSetup()
	hostSession(s)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				id := strconv.Itoa(w*100000 + i)
				s.FromHost(subscribeReq(id, "u"))
				if i%3 == 0 {
					s.FromHost([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`))
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 8000 {
			w, j := i%4, i/4
			s.FromServer([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(w*100000+j) + `,"result":{}}`))
			if i%1000 == 0 {
				s.Lost()
			}
		}
	})
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(s.waiting.Load()) != len(s.pending) || len(s.pending) > maxSetupAwaited {
		t.Fatalf("waiting %d, pending %d", s.waiting.Load(), len(s.pending))
	}
}
