package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// deepServerEnv makes this test binary a stdio MCP server (deepServer) instead of
// running its tests: a proxy started with it in its environment runs the binary as
// its upstream. Not a BIR_ name: those are removed from the upstream's environment.
const deepServerEnv = "H2REPLAY_DEEP_SERVER"

func init() {
	if os.Getenv(deepServerEnv) != "" {
		os.Exit(deepServer())
	}
}

// deepServer answers initialize, ping and the host's tools/call plainly, and a
// tools/call of the proxy's own (a "bir:" id) whose tool is "deep-N" with a result
// nested N levels deep: {"content":[],"deep":[[[...]]]}.
func deepServer() int {
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			id := gjson.GetBytes(line, "id")
			method := gjson.GetBytes(line, "method").String()
			if id.Exists() && method != "" {
				out.WriteString(`{"jsonrpc":"2.0","id":` + id.Raw + `,"result":`)
				tool := gjson.GetBytes(line, "params.name").String()
				switch {
				case method == "initialize":
					out.WriteString(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"deep","version":"1"}}`)
				case method == "tools/call" && strings.HasPrefix(id.Str, "bir:") && strings.HasPrefix(tool, "deep-"):
					n, _ := strconv.Atoi(strings.TrimPrefix(tool, "deep-"))
					out.WriteString(`{"content":[],"deep":`)
					out.WriteString(strings.Repeat("[", n))
					out.WriteString(strings.Repeat("]", n))
					out.WriteString(`}`)
				case method == "tools/call":
					out.WriteString(`{"content":[{"type":"text","text":"fine"}]}`)
				default:
					out.WriteString(`{}`)
				}
				out.WriteString("}\n")
				out.Flush()
			}
		}
		if err != nil {
			return 0
		}
	}
}

// deep is n levels of nested arrays.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestReplayDeepNestingDoesNotCrash: a poll answer nested ten million levels
// deep killed the proxy (fatal error: stack overflow in gjson's recursive validator),
// and so did a server's result to a dispatch; where it did not crash, 8 MiB of
// nested answer cost +575 MB. Now the replay paths read with internal/jsonlex's
// loops: the proxy lives on, the dispatches around the deep parts run, the deep
// results are posted, the host's session goes on, and the proxy's peak RSS stays
// within a bound.
func TestReplayDeepNestingDoesNotCrash(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the proxy's peak RSS from /proc")
	}
	t.Parallel()
	const levels = 10_000_000
	h := startHostileRecorder(t, nil)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := startProxy(t, append(h.env(t), deepServerEnv+"=1"), "--server", "deep", "--", exe)
	s.Send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"0.0.1"}}}`)
	if got := s.recv(); !strings.Contains(got, `"serverInfo"`) {
		t.Fatalf("initialize answered %s", got)
	}
	s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ctx := testutil.Context(t)

	// A server's result nested 4 million levels (8 MB: posted as it came); its
	// validation alone took the proxy's stack to hundreds of MB.
	h.answer([]byte(`{"dispatches":[{"dispatchId":"deep8m","tool":"deep-4000000"}]}`))
	if r := h.waitResults(ctx, t, "deep8m")["deep8m"]; gjson.Get(r, "outcome").String() != "ok" || !strings.Contains(r, `"deep":`+deep(4_000_000)+`}`) {
		t.Errorf("deep8m: want ok with the server's result as it came, got %.300s", r)
	}
	hwm := procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	t.Logf("peak RSS after an 8 MB nested result: %d MB", hwm>>20)
	// The 8 MB line, its copy in the result body and the POST's buffers.
	const bound8 = 120 << 20
	if hwm > bound8 {
		t.Errorf("peak RSS %d MB after an 8 MB nested result, over %d MB", hwm>>20, bound8>>20)
	}

	// Deep where the proxy reads: an unknown member (ten million levels, 20 MB), a
	// dispatch's unknown member, an element of dispatches and of cancel (five
	// million each: 50 MB in all, under the 64 MiB answer cap).
	h.answer([]byte(`{"extra":` + deep(levels) + `,"dispatches":[` + deep(levels/2) +
		`,{"dispatchId":"beside","tool":"echo","arguments":{},"x":` + deep(levels/2) + `}],"cancel":[` + deep(levels/2) + `]}`))
	if r := h.waitResults(ctx, t, "beside")["beside"]; gjson.Get(r, "outcome").String() != "ok" {
		t.Fatalf("the dispatch beside the deep parts: %s", r)
	}

	// And ten million levels (20 MB: clipped like a report).
	h.answer([]byte(`{"dispatches":[{"dispatchId":"deep20m","tool":"deep-` + strconv.Itoa(levels) + `"}]}`))
	if r := h.waitResults(ctx, t, "deep20m")["deep20m"]; gjson.Get(r, "outcome").String() != "ok" || gjson.Get(r, "resultClipped").Raw != "true" {
		t.Errorf("deep20m: want ok, clipped, got %.300s", r)
	}

	// The host's session goes on.
	s.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if a := s.recv(); gjson.Get(a, "id").Raw != "5" || !strings.Contains(a, "fine") {
		t.Fatalf("the host's call after the deep answers: %s", a)
	}
	hwm = procStatusKB(t, s.Cmd.Process.Pid, "VmHWM") << 10
	t.Logf("peak RSS %d MB", hwm>>20)
	// A 50 MB poll answer, 28 MB of results and their posts pass through; the recursion cost
	// hundreds of MB more.
	const bound = 400 << 20
	if hwm > bound {
		t.Errorf("peak RSS %d MB, over %d MB", hwm>>20, bound>>20)
	}
	s.Stdin.Close()
	if code := s.ExitCode(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}
