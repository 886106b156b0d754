package upstream

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// scriptedPeer answers the re-handshake's requests from a table, by method, and keeps
// what was sent in order.
type scriptedPeer struct {
	answers map[string]string // method → result or error member, e.g. `"result":{}`
	sent    []string
}

func (p *scriptedPeer) answer(msg, id []byte) []byte {
	f, _ := jsonlex.TopFields(msg)
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,` + p.answers[jsonlex.StringOf(f.Method)] + `}`)
}

func (p *scriptedPeer) Call(_ context.Context, req, id []byte) ([]byte, error) {
	p.sent = append(p.sent, string(req))
	return p.answer(req, id), nil
}

func (p *scriptedPeer) Send(_ context.Context, msg, id []byte, answered func([]byte)) error {
	p.sent = append(p.sent, string(msg))
	if id != nil && answered != nil {
		answered(p.answer(msg, id))
	}
	return nil
}

func TestReplayIsTheOneReHandshake(t *testing.T) {
	s := NewSetup()
	hostSession(s)
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	s.FromHost([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	s.FromServer([]byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a"}]}}`))

	for _, tc := range []struct {
		name, tools string
		changed     bool
	}{
		{"same tools", `"result":{"tools":[{"name":"a"}]}`, false},
		{"other tools", `"result":{"tools":[{"name":"b"}]}`, true},
		{"an error", `"error":{"code":-1,"message":"no"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &scriptedPeer{answers: map[string]string{
				"initialize":       `"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"new"}}`,
				"logging/setLevel": `"error":{"code":-32602,"message":"no levels here"}`,
				"tools/list":       tc.tools,
			}}
			logs := &testutil.SyncBuffer{}
			listed := 0
			var changed bool
			done, err := s.Replay(t.Context(), p, NewOwnIDs("bir:p:"), ReplayHooks{
				Log:    slog.New(slog.NewTextHandler(logs, nil)),
				Listed: func(_ []byte, c bool) { listed++; changed = c },
			})
			if err != nil || !done.Done || string(done.Init.ServerInfo) != `{"name":"new"}` {
				t.Fatalf("Replay: %+v, %v", done, err)
			}
			var methods []string
			for _, m := range p.sent {
				f, _ := jsonlex.TopFields([]byte(m))
				if f.ID != nil && !strings.HasPrefix(string(f.ID), `"bir:p:`) {
					t.Errorf("a request went with an id not of the proxy's own: %s", m)
				}
				methods = append(methods, jsonlex.StringOf(f.Method))
			}
			if got := strings.Join(methods, " "); got != "initialize notifications/initialized logging/setLevel tools/list" {
				t.Errorf("sent, in order: %s", got)
			}
			if listed != 1 || changed != tc.changed {
				t.Errorf("Listed called %d times, changed %v; want once, %v", listed, changed, tc.changed)
			}
			if !strings.Contains(logs.String(), "refused to restore part of the session") || !strings.Contains(logs.String(), "no levels here") {
				t.Errorf("the refused restore was not said:\n%s", logs)
			}
		})
	}

	// Another version: the session cannot go on, and nothing is restored.
	p := &scriptedPeer{answers: map[string]string{"initialize": `"result":{"protocolVersion":"2025-06-18","capabilities":{}}`}}
	_, err := s.Replay(t.Context(), p, NewOwnIDs(""), ReplayHooks{})
	var vm *VersionMismatchError
	if !errors.As(err, &vm) || len(p.sent) != 1 {
		t.Fatalf("a version mismatch gave %v after sending %d messages", err, len(p.sent))
	}
	// Nothing set up (the stateless era): nothing sent.
	p = &scriptedPeer{}
	if done, err := NewSetup().Replay(t.Context(), p, NewOwnIDs(""), ReplayHooks{}); err != nil || done.Done || len(p.sent) != 0 {
		t.Fatalf("an empty session replayed: %+v %v %v", done, err, p.sent)
	}
}
