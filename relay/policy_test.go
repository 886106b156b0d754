package relay_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/toolpolicy"
)

func policyList(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"echo"},{"name":"secret"}]}}`
}

func policyCut(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"echo"}]}}`
}

// TestFilterListAnswerNumberAsHostReadsIt: an answer whose id a JavaScript host reads
// as a list's number (JSON.parse's double, Number() of a string) is cut as that
// list's answer, the list still awaited by its exact id; megabytes of digits, of
// leading zeros, of exponent, of padding and of hex digits among them, with a flood
// of answers of such ids to nothing while the list is awaited. An id no list's number
// is goes as it is.
func TestFilterListAnswerNumberAsHostReadsIt(t *testing.T) {
	up := newReplacingConn()
	_, host := wireConn(t, up, nil, func(o *relay.Options) { o.Hooks = relay.ToolPolicy(&toolpolicy.Policy{Ignore: []string{"secret*"}}) })
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	host.send(t, `{"jsonrpc":"2.0","id":9007199254740992,"method":"tools/list"}`)
	written(t, up)
	written(t, up)
	const mb = 1 << 20
	same := []string{`1.0000000000000001`, `0.99999999999999999`, `1.` + strings.Repeat("0", 80), `0.` + strings.Repeat("0", 70) + `1e71`,
		`1` + strings.Repeat("0", mb) + `e-` + strconv.Itoa(mb), `0.` + strings.Repeat("0", mb) + `1e` + strconv.Itoa(mb+1),
		`0.1e` + strings.Repeat("0", mb) + `1`, `"0x` + strings.Repeat("0", mb) + `1"`, `"` + strings.Repeat(" ", mb) + `1"`,
		`9007199254740993`, `"9007199254740993"`, `"0x20000000000001"`, `1`}
	for _, id := range same {
		up.from <- fromServer{msg: []byte(policyList(id))}
		if got := host.next(t); got != policyCut(id) {
			t.Errorf("the answer of the id %.40s… reached the host as %.200s", id, got)
		}
	}
	// The exact answer of 1 was the last: 1 is no longer awaited; 9007199254740992 is.
	other := []string{`2`, `1.0000000000000003`, `1`, `"0x` + strings.Repeat("f", mb) + `"`, `1e` + strings.Repeat("9", mb), `"1e"`}
	for i := range 200 {
		other = append(other, `"`+strings.Repeat("0", 64<<10)+strconv.Itoa(i+2)+`"`)
	}
	for _, id := range other {
		up.from <- fromServer{msg: []byte(policyList(id))}
		if got := host.next(t); got != policyList(id) {
			t.Errorf("the answer of the id %.40s… reached the host as %.200s", id, got)
		}
	}
	up.from <- fromServer{msg: []byte(policyList(`9007199254740992.0`))}
	if got := host.next(t); got != policyCut(`9007199254740992.0`) {
		t.Errorf("the list past 2^53 answered %.200s", got)
	}
}

// TestCallTimeoutLateAnswerNumberAsHostReadsIt: the late answer of a call answered at
// its deadline is dropped when its id is one a JavaScript host reads as the call's
// number (1.0000000000000001 for 1): it would answer the host's next request of that
// number. One of the exact id of a host request in flight is that request's.
func TestCallTimeoutLateAnswerNumberAsHostReadsIt(t *testing.T) {
	up := newReplacingConn()
	_, host := wireConn(t, up, nil, func(o *relay.Options) {
		o.Hooks = relay.ToolPolicy(&toolpolicy.Policy{CallTimeout: 20 * time.Millisecond})
	})
	host.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":7}}}`)
	written(t, up)
	if got := host.next(t); !strings.Contains(got, `"id":1,"error":{"code":-32001`) {
		t.Fatalf("the host got %s", got)
	}
	written(t, up) // the cancel
	host.send(t, `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`)
	written(t, up)
	// The exact id of a host request in flight: its answer, though 1 is late.
	host.send(t, `{"jsonrpc":"2.0","id":1.0000000000000001,"method":"ping"}`)
	written(t, up)
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":1.0000000000000001,"result":{}}`)}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":1.0000000000000001,"result":{}}` {
		t.Fatalf("the host got %s", got)
	}
	// Its progress, of a token a TypeScript SDK host reads as 7 (Number(token)).
	for _, tok := range []string{`7.0000000000000001`, `"7"`, `7`} {
		up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + tok + `,"progress":1}}`)}
	}
	for _, id := range []string{`1.0000000000000001`, `"1"`, `"0x1"`, `0.1e1`} {
		up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"late":true}}`)}
	}
	up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":1.5,"result":{}}`)}
	if got := host.next(t); got != `{"jsonrpc":"2.0","id":1.5,"result":{}}` {
		t.Fatalf("a late answer reached the host: %s", got)
	}
}

// TestFilterManyNamesAndNesting: a host tools/call with 10^5 "name" members in its
// params, the hidden one first, last or in the middle, is refused; with none hidden it
// goes; params and arguments nested 10^5 deep, and a name in the nesting, are read
// in one pass without recursion (a stack per level would be 10^5 frames).
func TestFilterManyNamesAndNesting(t *testing.T) {
	up := newReplacingConn()
	_, host := wireConn(t, up, nil, func(o *relay.Options) {
		o.Hooks = relay.ToolPolicy(&toolpolicy.Policy{Ignore: []string{"secret*"}})
		o.MaxMessage = 64 << 20
	})
	const n = 100000
	names := func(at int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if i == at {
				b.WriteString(`"name":"secret_x"`)
			} else {
				b.WriteString(`"name":"echo"`)
			}
		}
		return b.String()
	}
	for i, at := range []int{0, n / 2, n - 1} {
		id := strconv.Itoa(i + 1)
		host.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{`+names(at)+`,"arguments":{}}}`)
		if got := host.next(t); got != `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32602,"message":"Unknown tool: secret_x"}}` {
			t.Fatalf("the host got %.200s", got)
		}
	}
	deep := strings.Repeat(`{"name":`, n) + `"secret"` + strings.Repeat(`}`, n)
	visible := []string{
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{` + names(-1) + `,"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":` + deep + `}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","x":` + strings.Repeat(`[`, n) + strings.Repeat(`]`, n) + `}}`,
	}
	for _, m := range visible {
		host.send(t, m)
		if got := written(t, up); got != m {
			t.Fatalf("the server got %.200s", got)
		}
	}
	// A name that is an object: a server reads no hidden tool's name there.
	m := `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":` + deep + `}}`
	host.send(t, m)
	if got := written(t, up); got != m {
		t.Fatalf("the server got %.200s", got)
	}
}

// TestCallTimeoutReusedIDsHeld: 2 and 8 calls past their deadline, their ids reused
// in one batch with a ping: the ping goes at once, each reused request once its old
// call's late answer came (dropped), or is answered by the relay after the deadline
// when none came; a reused request the host cancels meanwhile goes nowhere. Every id
// gets exactly one answer.
func TestCallTimeoutReusedIDsHeld(t *testing.T) {
	for _, n := range []int{2, 8} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			up := newReplacingConn()
			_, host := wireConn(t, up, nil, func(o *relay.Options) {
				o.Hooks = relay.ToolPolicy(&toolpolicy.Policy{CallTimeout: 100 * time.Millisecond})
			})
			for i := range n {
				host.send(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i)+`,"method":"tools/call","params":{"name":"a"}}`)
				written(t, up)
			}
			for range n {
				if got := host.next(t); !strings.Contains(got, `"code":-32001`) {
					t.Fatalf("the host got %s", got)
				}
				written(t, up) // the cancel
			}
			batch := `[{"jsonrpc":"2.0","id":"p","method":"ping"}`
			for i := range n {
				batch += `,{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"new"}}`
			}
			host.send(t, batch+`]`)
			if got := written(t, up); got != `[{"jsonrpc":"2.0","id":"p","method":"ping"}]` {
				t.Fatalf("the server got %s", got)
			}
			// The last is cancelled by the host; the first half's late answers come.
			host.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+strconv.Itoa(n-1)+`}}`)
			written(t, up)
			for i := range n / 2 {
				up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"result":{"old":true}}`)}
			}
			for range n / 2 {
				got := written(t, up)
				if !strings.Contains(got, `"name":"new"`) {
					t.Fatalf("the server got %s", got)
				}
				up.from <- fromServer{msg: []byte(strings.Replace(got, `"method":"tools/call","params":{"name":"new"}`, `"result":{"new":true}`, 1))}
			}
			answers := map[string]string{}
			for len(answers) < n-1 {
				got := host.next(t)
				id := got[strings.Index(got, `"id":`)+5:]
				id = id[:strings.IndexByte(id, ',')]
				if prev, ok := answers[id]; ok {
					t.Fatalf("id %s answered twice: %s, then %s", id, prev, got)
				}
				answers[id] = got
			}
			for i := range n - 1 {
				got := answers[strconv.Itoa(i)]
				if i < n/2 && !strings.Contains(got, `"new":true`) || i >= n/2 && !strings.Contains(got, "the request was not sent") {
					t.Errorf("id %d answered %s", i, got)
				}
			}
			// Nothing more: the next is the ping's answer.
			up.from <- fromServer{msg: []byte(`{"jsonrpc":"2.0","id":"p","result":{}}`)}
			if got := host.next(t); got != `{"jsonrpc":"2.0","id":"p","result":{}}` {
				t.Fatalf("the host got %s", got)
			}
		})
	}
}
