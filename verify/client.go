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

// Client is verify's session with a server, for a caller that makes its own calls
// (bir-proxy call): the same start, the same handshake (the header's era, upstream.Setup),
// the same handling of the server's own requests (a ping answered, the rest refused).
type Client struct {
	s    *session
	conn upstream.Conn
}

// Answer is a server's answer to one request: its result or its error, raw.
type Answer struct {
	Result, Error []byte
}

// Connect starts or connects to the server with dial and makes the handshake of the
// era it speaks, within timeout (0: none): the session era's initialize (init, its
// params), made as verify makes a recorded one (session.handshake, upstream.Setup); a
// server that refuses it with an error answer and answers server/discover carrying
// meta (the stateless era's params._meta, 2026-07-28) is spoken to in that era, every
// request carrying meta. The header says which, as a cassette's would: what a recording
// of the session keeps. A failure is an *UnreachableError: the server did not start,
// or took neither handshake.
func Connect(ctx context.Context, dial func(context.Context) (upstream.Conn, error), idPrefix string, timeout time.Duration, init, meta []byte) (*Client, *cassette.Header, error) {
	conn, err := dial(ctx)
	if err != nil {
		return nil, nil, &UnreachableError{fmt.Errorf("starting the server: %w", err)}
	}
	c := &Client{s: newSession(conn, idPrefix), conn: conn}
	hsCtx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		hsCtx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	stop := c.s.watch(hsCtx, "the handshake ran out of time or was interrupted")
	defer stop()
	h := &cassette.Header{Version: cassette.Version, Era: cassette.EraSession, Initialize: init}
	res, err := c.s.handshake(hsCtx, h)
	if err == nil {
		h.InitializeResult, h.Initialized = res, true
		h.ProtocolVersion = jsonlex.StringOf(jsonlex.Get(res, "protocolVersion"))
		return c, h, nil
	}
	if c.s.gone() == "" && hsCtx.Err() == nil && meta != nil {
		// A server of the stateless era alone refuses initialize: ask it as that era.
		c.s.meta = meta
		a, derr := c.s.request(hsCtx, 0, "server/discover", nil)
		if derr == nil && a.err == nil {
			return c, &cassette.Header{Version: cassette.Version, Era: cassette.EraStateless, Meta: meta, DiscoverResult: a.result,
				ProtocolVersion: jsonlex.StringOf(jsonlex.Get(meta, "io.modelcontextprotocol/protocolVersion"))}, nil
		}
	}
	if why := c.s.gone(); why != "" && !errors.Is(err, context.DeadlineExceeded) {
		err = errors.New(why)
	}
	c.Close()
	return nil, nil, &UnreachableError{fmt.Errorf("the handshake with the server: %w", err)}
}

// ListTools lists the server's tools, every page (bounded as verify's are): the JSON
// array of them all, and cut saying why paging stopped early, if it did.
func (c *Client) ListTools(ctx context.Context) (all []byte, cut string, err error) {
	_, all, cut, err = c.s.listTools(ctx)
	return all, cut, c.lost(err)
}

// Call makes a tools/call of tool with args (a JSON object's bytes, or nil), waiting at
// most timeout (0: for ever). An answer that will not come (the server exited) is an
// *UnreachableError; no answer in time is another error.
func (c *Client) Call(ctx context.Context, timeout time.Duration, tool string, args []byte) (Answer, error) {
	params := append([]byte(`{"name":`), jsonlex.AppendString(nil, tool)...)
	if args != nil {
		params = append(append(params, `,"arguments":`...), args...)
	}
	params = append(params, '}')
	a, err := c.s.request(ctx, timeout, "tools/call", params)
	if errors.Is(err, errExpired) {
		return Answer{}, fmt.Errorf("no answer within %s", timeout)
	}
	if err != nil {
		return Answer{}, c.lost(err)
	}
	return Answer{Result: a.result, Error: a.err}, nil
}

// lost makes an answer that will not come an *UnreachableError.
func (c *Client) lost(err error) error {
	var l *errLost
	if errors.As(err, &l) {
		return &UnreachableError{err}
	}
	return err
}

// Close ends the session: the connection closed (a process stopped), the reader and
// the answers being written waited for.
func (c *Client) Close() {
	c.conn.Close()
	<-c.s.done
	c.s.replies.Wait()
}
