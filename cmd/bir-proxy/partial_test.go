package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestPartialLineNeverReachesTheHost: a server that dies halfway through a line over
// 1 MiB, cut just after a "}", left the proxy holding a line with the ends of a JSON
// object; big lines were judged by their ends, so the host got 2.5 MB of broken JSON
// with a newline added. A line the server did not finish with a newline is forwarded
// only if it is a whole JSON value. Revival or not: the bug is in reading.
//
// A line streamed to the host as it arrives (docs/ARCHITECTURE.md, "Long messages")
// cannot be taken back: there the host gets what was passed on, ended by a newline so
// that its next message stays whole (its parser rejects that one line), and then the
// error answer for the call; with streaming off, nothing of it.
func TestPartialLineNeverReachesTheHost(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	for _, mode := range [][]string{{"--no-revive"}, nil} {
		for _, stream := range []string{"0", "default"} {
			t.Run(map[bool]string{true: "no-revive", false: "revive"}[mode != nil]+"/stream-"+stream, func(t *testing.T) {
				t.Parallel()
				partialLine(t, raw, mode, stream)
			})
		}
	}
}

func partialLine(t *testing.T, raw string, mode []string, stream string) {
	env := []string{"BIR_STREAM_THRESHOLD=" + stream}
	if stream == "default" {
		env = []string{"BIR_STREAM_THRESHOLD="}
	}
	args := append(append([]string{"--server", "raw"}, mode...), "--", raw, "--reply", "--exit-code", "1")
	s := startProxy(t, env, args...)
	s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"partial","arguments":{}}}`)
	broken := 0
	for {
		msg, err := s.out.Read()
		if errors.Is(err, io.EOF) {
			if broken > 0 {
				t.Fatal("the call whose answer was cut off got no error answer")
			}
			break // --no-revive: the session ended with the server
		}
		if err != nil {
			t.Fatalf("reading from the proxy: %v", err)
		}
		if !json.Valid(msg) {
			if broken++; stream == "0" || broken > 1 {
				t.Fatalf("the host got a line that is not JSON: %d bytes, %.80s…%s", len(msg), msg, msg[max(0, len(msg)-40):])
			}
			continue
		}
		if id, _ := jsonID(msg); id == "1" {
			if !bytes.Contains(msg, []byte(`"error"`)) {
				t.Fatalf("the cut-off call's answer: %.200s", msg)
			}
			break // the call in flight got its error answer
		}
	}
	if stream == "default" && broken != 1 {
		t.Fatalf("streamed: the host got %d cut-off lines, want the 1 that was streamed", broken)
	}
	s.Stdin.Close()
	s.ExitCode()
}

// jsonID is the raw id of a message, for tests.
func jsonID(msg []byte) (string, bool) {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &m) != nil || m.ID == nil {
		return "", false
	}
	return string(m.ID), true
}
