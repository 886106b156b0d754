package upstream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// RehandshakePeer is a new server being brought up to the host's session, reached
// through its new Conn: a revived child, or a new remote session after the last one
// ended (session.Conn runs both). Setup.Replay drives it, so
// what is sent, in which order, and how the answers are judged is the same for both.
// Every request Replay sends is the proxy's own (its id from OwnIDs): the host never
// sees it or its answer.
type RehandshakePeer interface {
	// Call sends req, a request of the proxy's own whose raw id is id, and returns
	// the server's answer to it (an error answer too: Replay judges it). What the
	// server sends meanwhile is the peer's to keep for the host, in order. Its error
	// names the request ("did not answer initialize within 5s").
	Call(ctx context.Context, req, id []byte) ([]byte, error)
	// Send sends msg without waiting for an answer it does not need. When id is set,
	// msg is a request of the proxy's own: the peer hands its answer to answered (at
	// most once, on any goroutine; not at all when none comes in time), never to the
	// host.
	Send(ctx context.Context, msg, id []byte, answered func(answer []byte)) error
}

// ReplayHooks are what a re-handshake's caller learns as it goes; each may be nil.
type ReplayHooks struct {
	// Listed gets the new server's tools (raw; nil when its answer was an error) when
	// the host was told its list may change: changed says they differ from the list
	// the host was last given, and the host must be told (notifications/tools/
	// list_changed). Compared as bytes: a server that re-encodes the same tools
	// differently costs the host one tools/list more.
	Listed func(tools []byte, changed bool)
	// Log is where a refused restore is said.
	Log *slog.Logger
}

// Replayed is what a re-handshake did.
type Replayed struct {
	// Init is what the new server's initialize answer said.
	Init InitAnswer
	// Done is false when there was nothing to replay: the stateless era, or a host
	// whose initialize was never answered. The next request then starts afresh.
	Done bool
}

// Replay brings the server behind p to the state the host set up on the old one
// (Rehandshake): the host's initialize under an id of the proxy's own, waiting for its
// answer, which must negotiate the host's version (CheckInitialize); then the host's
// notifications/initialized, log level and subscriptions, whose answers are only
// looked at for a refusal; then, when the host may be told the tools changed, a
// tools/list of the proxy's own (ReplayHooks.Listed). An error means the session
// cannot go on with this server; a *VersionMismatchError says it speaks another
// version.
func (s *Setup) Replay(ctx context.Context, p RehandshakePeer, ids *OwnIDs, h ReplayHooks) (Replayed, error) {
	rh := s.Rehandshake(ids.NextRaw)
	if rh.Initialize == nil {
		return Replayed{}, nil
	}
	answer, err := p.Call(ctx, rh.Initialize, rh.InitializeID)
	if err != nil {
		return Replayed{}, err // the peer's error names what it was doing
	}
	ia, err := s.CheckInitialize(answer)
	if err != nil {
		return Replayed{Init: ia}, err
	}
	done := Replayed{Init: ia, Done: true}
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	for _, m := range rh.After {
		f, _ := jsonlex.TopFields(m)
		var answered func([]byte)
		if f.IsRequest() {
			method := jsonlex.StringOf(f.Method)
			answered = func(a []byte) {
				if af, ok := jsonlex.TopFields(a); ok && af.Error != nil {
					log.Warn("the new server refused to restore part of the session", "method", method, "error", clip(af.Error, 200))
				}
			}
		} else {
			f.ID = nil
		}
		if err := p.Send(ctx, m, f.ID, answered); err != nil {
			return done, fmt.Errorf("restoring the session: %w", err)
		}
	}
	before := s.Tools()
	if h.Listed == nil || !s.ToolsListChanged() || before == nil {
		return done, nil
	}
	id := ids.NextRaw()
	req := []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"method":"tools/list","params":{}}`)
	err = p.Send(ctx, req, id, func(a []byte) {
		f, _ := jsonlex.TopFields(a)
		tools := jsonlex.Get(f.Result, "tools")
		changed := f.Error != nil || tools == nil || !bytes.Equal(bytes.TrimSpace(tools), bytes.TrimSpace(before))
		h.Listed(tools, changed)
	})
	if err != nil {
		return done, fmt.Errorf("listing the tools: %w", err)
	}
	return done, nil
}

// clip is b as a string of at most n bytes, for a log line.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
