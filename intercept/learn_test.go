package intercept

import (
	"strings"
	"testing"
)

// learnFrom runs one handshake request of method and the server's answer result
// through an Interceptor, and returns what it learned (nil when nothing).
func learnFrom(t *testing.T, method, result string) []string {
	t.Helper()
	s := newSession(t)
	s.host(`{"jsonrpc":"2.0","id":1,"method":"` + method + `"}`)
	s.up(`{"jsonrpc":"2.0","id":1,"result":` + result + `}`)
	s.close()
	if len(s.sink.facts) == 0 {
		return nil
	}
	f := s.sink.facts[len(s.sink.facts)-1]
	return append([]string{string(f.ServerInfo), f.ProtocolVersion}, f.Tools...)
}

// TestLearnedFactsTakeTheLastDuplicate: what the handshake answers tell the recorder
// is read with the one duplicate-key rule the proxy has (the last member wins, as the
// host's JSON.parse reads them). gjson's first-wins registered "first" for a tool the
// host knows as "last".
func TestLearnedFactsTakeTheLastDuplicate(t *testing.T) {
	if got := learnFrom(t, "tools/list", `{"tools":[{"name":"first","name":"last"},{"name":"b"}]}`); strings.Join(got[2:], ",") != "last,b" {
		t.Errorf("tools/list: learned tools %q, want last,b", got[2:])
	}
	got := learnFrom(t, "initialize", `{"protocolVersion":"2025-03-26","serverInfo":{"name":"a"},"protocolVersion":"2025-06-18","serverInfo":{"name":"b"}}`)
	if got[0] != `{"name":"b"}` || got[1] != "2025-06-18" {
		t.Errorf("initialize: learned %q, want the last serverInfo and protocolVersion", got)
	}
	got = learnFrom(t, "server/discover", `{"supportedVersions":["x"],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"a"}},"supportedVersions":["2025-06-18","2026-07-28"],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b"}}}`)
	if got[0] != `{"name":"b"}` || got[1] != "2026-07-28" {
		t.Errorf("server/discover: learned %q", got)
	}
	// What is not the shape expected is not learned (a name that is not a string
	// names no tool a host can call), and nothing breaks on it.
	got = learnFrom(t, "tools/list", `{"tools":[{"name":1},"x",{"title":"no name"},{"name":"ok"}]}`)
	if strings.Join(got[2:], ",") != "ok" {
		t.Errorf("tools/list of odd shapes: learned %q", got[2:])
	}
	got = learnFrom(t, "initialize", `{"serverInfo":{"name":"unterminated","protocolVersion":"x"}`)
	if got != nil && got[0] != "" {
		t.Errorf("a result that is not JSON gave serverInfo %q", got[0])
	}
}

// TestLearnFromDeepResults: a handshake answer nested 10^7 levels deep, where each
// fact is looked for, is read without recursion (gjson's reading of it recursed), and
// what is there is learned. Its bound is the test's: bookkeeping must get to the
// report-free answer and back, as for any other.
func TestLearnFromDeepResults(t *testing.T) {
	const depth = 10_000_000
	deepArr := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	deepObj := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
	cases := []struct{ method, result, want string }{
		{"tools/list", `{"tools":` + deepArr + `}`, ""},
		{"tools/list", `{"tools":[{"name":"a","schema":` + deepObj + `},` + deepArr + `,{"name":"b"}]}`, "a,b"},
		{"tools/list", `{"tools":[{"name":` + deepArr + `},{"name":"c"}]}`, "c"},
		{"initialize", `{"protocolVersion":` + deepArr + `,"capabilities":` + deepObj + `,"serverInfo":{"name":"d"}}`, `{"name":"d"}`},
		{"server/discover", `{"supportedVersions":` + deepArr + `,"_meta":` + deepObj + `}`, ""},
	}
	for _, c := range cases {
		got := learnFrom(t, c.method, c.result)
		var s string
		if c.method == "tools/list" {
			s = strings.Join(got[2:], ",")
		} else {
			s = got[0]
		}
		if s != c.want {
			t.Errorf("%s of a deep result (%.40s...): learned %.80q, want %q", c.method, c.result, s, c.want)
		}
	}
}
