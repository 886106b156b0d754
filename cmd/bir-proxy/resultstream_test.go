package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// longAnswers are the server's answers to tools/call "write" id 7 that
// TestLongAnswerIsRecordedAsWhole streams to the host: each past the default
// threshold but the error's, which streams with every line streamed.
func longAnswers() map[string]string {
	text := strings.Repeat("0123456789abcdef", 256<<10) // 4 MiB
	secret := `password: hunter2 api_key=sk-live-0123456789abcdefghijklmnop `
	return map[string]string{
		// A tool's error, said last, after 4 MiB of text with a secret in it.
		"tool error": `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + secret + text + `"},{"type":"text","text":"{\"token\":\"ghp_0123456789abcdefghijklmnopqrstuvwxyz\"}"}],"isError":true}}`,
		// The id after the result, as a JavaScript server's JSON.stringify may put it.
		"id last": `{"jsonrpc":"2.0","result":{"content":[{"type":"image","data":"` + text + `","mimeType":"image/png"}]},"id":7}`,
		// Two results: the host's JSON.parse keeps the last, and so must the report.
		"duplicate result": `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + text + `"}]},"result":{"content":[{"type":"text","text":"second"}],"isError":false}}`,
		"input required":   `{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"` + text + `"}}}}}`,
		"error":            `{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"boom","data":"` + secret + strings.Repeat("x", 40<<10) + `"}}`,
		"not an object":    `{"jsonrpc":"2.0","id":7,"result":["` + text + `",1,2]}`,
	}
}

// TestLongAnswerIsRecordedAsWhole: recording, a long answer streamed to the host is
// reduced as it passes, and the report of the call it answers (outcome, result,
// error) is the one the same answer read whole gets, for each shape in longAnswers;
// the host gets the answer unchanged either way.
func TestLongAnswerIsRecordedAsWhole(t *testing.T) {
	answers := longAnswers()
	report := func(threshold, answer string) map[string]any {
		journal := filepath.Join(t.TempDir(), "j.jsonl")
		r := startStreamRig(t, []string{"BIR_OFF=0", "BIR_STREAM_THRESHOLD=" + threshold}, "--server", "s", "--journal", journal)
		s := r.server()
		r.handshake(t, s)
		r.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write","arguments":{"path":"/tmp/x"}}}`)
		s.recvLine(t)
		s.print(t, answer+"\n")
		if got := r.lines(2)[1]; got != answer {
			t.Fatalf("threshold %q: the host got %d bytes %.100q, want the answer (%d bytes)", threshold, len(got), got, len(answer))
		}
		r.stdin.Close()
		r.exited("the host closed its input")
		m := writeReport(t, journal)
		if m == nil {
			t.Fatalf("threshold %q: no report of the call in the journal", threshold)
		}
		return m
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			whole := report("0", answer)
			for _, threshold := range []string{"", "1"} {
				streamed := report(threshold, answer)
				for _, k := range []string{"outcome", "result", "resultClipped", "error"} {
					w, _ := json.Marshal(whole[k])
					g, _ := json.Marshal(streamed[k])
					if string(w) != string(g) {
						t.Errorf("threshold %q, %s: streamed %.300s, whole %.300s", threshold, k, g, w)
					}
				}
			}
			b, _ := json.Marshal(whole)
			for _, leak := range []string{"hunter2", "sk-live-0123456789", "ghp_0123456789"} {
				if strings.Contains(string(b), leak) {
					t.Errorf("the report holds %q: %.300s", leak, b)
				}
			}
			want := map[string]string{"tool error": "tool_error", "input required": "input_required", "error": "rpc_error"}[name]
			if want == "" {
				want = "ok"
			}
			if whole["outcome"] != want {
				t.Errorf("outcome %v, want %s", whole["outcome"], want)
			}
		})
	}
}
