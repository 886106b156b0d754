package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOverCapRequestWithALongIDIsAnswered: a request over --max-message whose id was
// longer than the 1,024 bytes the line's scan kept was taken for a notification (no
// id found) and never answered: the host waited for ever. An id up to 64 KiB is now
// kept and answered; a longer one is answered with an id of null, as JSON-RPC says
// when the id cannot be determined. Whether the id comes first or last, and whether
// the line is read whole or streamed to the server (BIR_STREAM_THRESHOLD=1).
func TestOverCapRequestWithALongIDIsAnswered(t *testing.T) {
	for _, stream := range []string{"0", "1"} {
		for _, idLen := range []int{2000, 70000} {
			for _, at := range []string{"first", "middle", "last"} {
				t.Run("stream="+stream+"/id="+strconv.Itoa(idLen)+"/"+at, func(t *testing.T) {
					// The cap is passed in the params: after the id, or (last) before it.
					_, in, out, _ := rawProxy(t, nil, []string{"BIR_STREAM_THRESHOLD=" + stream},
						[]string{"--server", "longid", "--max-message", "98304"}, "--reply")
					id := `"` + strings.Repeat("i", idLen) + `"`
					for _, method := range []string{"tools/call", "ping"} {
						params := `{"name":"echo","arguments":{"pad":"` + strings.Repeat("p", 100000) + `"}}`
						msg := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
						switch at {
						case "middle": // the method first: streamed from its head on
							msg = `{"jsonrpc":"2.0","method":"` + method + `","id":` + id + `,"params":` + params + `}`
						case "last": // as the TypeScript SDK writes it: after the cap
							msg = `{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `,"id":` + id + `}`
						}
						in.WriteString(msg + "\n")
						got := readWithin(t, out)
						var a struct {
							ID    json.RawMessage
							Error *struct{ Code int }
						}
						if err := json.Unmarshal([]byte(got), &a); err != nil || a.Error == nil || a.Error.Code != -32600 {
							t.Fatalf("%s: host got %.300s", method, got)
						}
						want := id
						if idLen > 64<<10 {
							want = "null"
						}
						if string(a.ID) != want {
							t.Fatalf("%s: answered with id %.80s (%d bytes), want %.80s", method, a.ID, len(a.ID), want)
						}
					}
					in.WriteString(`{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n")
					if got := readWithin(t, out); !strings.Contains(got, `"id":7`) {
						t.Fatalf("after: host got %.200s", got)
					}
				})
			}
		}
	}
}

// TestOverCapServerRequestWithALongIDIsAnswered: the same from the server's side: a
// request of the server's over --max-message with an id over 1,024 bytes got no
// answer; the server now gets the over-cap error with its id, or null past 64 KiB.
func TestOverCapServerRequestWithALongIDIsAnswered(t *testing.T) {
	for _, stream := range []string{"0", "1"} {
		for _, idLen := range []int{2000, 70000} {
			t.Run("stream="+stream+"/id="+strconv.Itoa(idLen), func(t *testing.T) {
				dir := t.TempDir()
				record, emit := filepath.Join(dir, "received"), filepath.Join(dir, "emit")
				id := `"` + strings.Repeat("s", idLen) + `"`
				big := `{"jsonrpc":"2.0","method":"sampling/createMessage","params":{"pad":"` + strings.Repeat("p", 100000) + `"},"id":` + id + `}`
				if err := os.WriteFile(emit, []byte(big+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				_, in, out, done := rawProxy(t, nil, []string{"BIR_STREAM_THRESHOLD=" + stream},
					[]string{"--server", "longid", "--max-message", "98304"}, "--reply", "--record", record, "--emit", emit)
				in.WriteString(`{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n")
				for {
					// A streamed request reaches the host cut at the cap first.
					if got := readWithin(t, out); strings.Contains(got, `"id":7`) {
						break
					}
				}
				want := id
				if idLen > 64<<10 {
					want = "null"
				}
				// Read once the proxy has ended: whatever it wrote the server is there.
				in.Close()
				<-done
				got, _ := os.ReadFile(record)
				if !strings.Contains(string(got), `{"jsonrpc":"2.0","id":`+want+`,"error":{"code":-32600,`) {
					t.Fatalf("the server was not answered for its over-cap request with id %.40s…; it received:\n%.400s", want, got)
				}
			})
		}
	}
}
