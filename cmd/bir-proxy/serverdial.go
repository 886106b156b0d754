package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/bir-dev/bir-proxy/internal/cause"
	"github.com/bir-dev/bir-proxy/upstream"
)

// serverDial is how a command that is the server's client (verify, call) reaches it:
// at --url, with the proxy's headers and OAuth, or by starting p.command as the proxy
// starts it; one server, or one session, with no revival (a short client's session
// that ends is an error it reports). peerErr is where the OAuth prompts go, serverErr
// a started server's stderr. On failure code is the exit status: 2 for flags that do
// not make a remote, 3 for OAuth that could not be set up. closeAuth is called when
// done.
func (p *proxyFlags) serverDial(logger *slog.Logger, peerErr, serverErr io.Writer) (dial func(context.Context) (upstream.Conn, error), closeAuth func(), code int, err error) {
	if p.url != "" {
		r, err := p.remote(logger, peerErr)
		if err != nil {
			return nil, nil, 2, err
		}
		closeAuth, err := p.withOAuth(&r, logger, peerErr)
		if err != nil {
			return nil, nil, 3, err
		}
		return r.Dial, closeAuth, 0, nil
	}
	cmd := upstream.Command{
		Path:       p.command[0],
		Args:       p.command[1:],
		Env:        upstream.ChildEnv(os.Environ()),
		Name:       p.server,
		Stderr:     serverErr,
		Supervisor: supervisor(),
		MaxMessage: p.maxMessage,
		Logger:     logger,

		ExecSupervisor: execSupervisor(), // BIR_SUPERVISE=exec: not forked
	}
	return func(ctx context.Context) (upstream.Conn, error) {
		conn, err := cmd.Dial(ctx)
		if err != nil {
			reason, _ := cause.Start(p.server, p.command, err)
			return nil, errors.New(strings.TrimPrefix(reason, "bir-proxy: "))
		}
		return conn, nil
	}, func() {}, 0, nil
}
