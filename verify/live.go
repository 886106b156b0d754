package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/upstream"
)

// Live is a session with a live server started and handshaken the way verify does it
// (the recorded host's handshake, then its tools listed): `bir-proxy mock --fallback`
// sends it the calls no recording matches.
type Live struct {
	s *session
	// Tools is the server's tools/list (every page, as an array), InitializeResult
	// its answer to initialize (nil in the stateless era): a new recording's header.
	Tools            []byte
	InitializeResult []byte
	timeout          time.Duration
}

// DialLive starts the server with dial and makes h's handshake within timeout, which
// also bounds each call (0: DefaultCallTimeout). ids are prefix + n.
func DialLive(ctx context.Context, dial func(context.Context) (upstream.Conn, error), h *cassette.Header, prefix string, timeout time.Duration) (*Live, error) {
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	conn, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	l := &Live{s: newSession(conn, prefix), timeout: timeout}
	hsCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := l.s.watch(hsCtx, "the handshake ran out of time or was interrupted")
	l.InitializeResult, err = l.s.handshake(hsCtx, h)
	if err == nil {
		var cut string
		_, l.Tools, cut, err = l.s.listTools(hsCtx)
		if cut != "" {
			l.Tools = nil // a partial list is no header's
		}
	}
	stop()
	if err != nil {
		if why := l.s.gone(); why != "" && !errors.Is(err, context.DeadlineExceeded) {
			err = errors.New(why)
		}
		l.Close()
		return nil, fmt.Errorf("the handshake with the server: %w", err)
	}
	return l, nil
}

// Call sends a tools/call of tool with args (raw; nil: none) and returns the server's
// raw result or error; err when no answer came (the server gone, the timeout, ctx).
func (l *Live) Call(ctx context.Context, tool string, args []byte) (result, rpcErr []byte, err error) {
	p := jsonlex.AppendString([]byte(`{"name":`), tool)
	if args != nil {
		p = append(append(p, `,"arguments":`...), args...)
	}
	p = append(p, '}')
	a, err := l.s.request(ctx, l.timeout, "tools/call", p)
	if err != nil {
		return nil, nil, err
	}
	return a.result, a.err, nil
}

// Close ends the session and the server.
func (l *Live) Close() {
	l.s.conn.Close()
	<-l.s.done
	l.s.replies.Wait()
}
