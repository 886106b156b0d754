package main

import (
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
func TestPartialLineNeverReachesTheHost(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	for _, mode := range [][]string{{"--no-revive"}, nil} {
		t.Run(map[bool]string{true: "no-revive", false: "revive"}[mode != nil], func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"--server", "raw"}, mode...), "--", raw, "--reply", "--exit-code", "1")
			s := startProxy(t, nil, args...)
			s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"partial","arguments":{}}}`)
			for {
				msg, err := s.out.Read()
				if errors.Is(err, io.EOF) {
					break // --no-revive: the session ended with the server
				}
				if err != nil {
					t.Fatalf("reading from the proxy: %v", err)
				}
				if !json.Valid(msg) {
					t.Fatalf("the host got a line that is not JSON: %d bytes, %.80s…%s", len(msg), msg, msg[max(0, len(msg)-40):])
				}
				if id, _ := jsonID(msg); id == "1" {
					break // revived: the call in flight got its error answer
				}
			}
			s.Stdin.Close()
			s.ExitCode()
		})
	}
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
