package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/bir-dev/bir-proxy/cmd/bir-proxy/internal/authcmd"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/upstream"
)

// withOAuth gives r an OAuth client, unless --no-oauth or an Authorization header
// (which wins). The client is closed by the returned func.
func (f *proxyFlags) withOAuth(r *upstream.Remote, logger *slog.Logger, notes io.Writer) (closeFn func(), err error) {
	if f.oauth.Off || r.Header.Get("Authorization") != "" {
		return func() {}, nil
	}
	if r.Client == nil {
		r.Client = upstream.NewHTTPClient(f.connectTimeout)
	}
	c, err := f.oauth.Client(r.URL, redact.URL(f.url), f.server, r.Client, logger, notes)
	if err != nil {
		return nil, fmt.Errorf("OAuth: %w", err)
	}
	r.Auth = c
	c.Preload() // while the host starts up, not on its first request
	return c.Close, nil
}

// runLogin is `bir-proxy login`: its room is authcmd.
func runLogin(ctx context.Context, c *cli, args []string) int {
	o, code, ok := c.authOptions("login", args)
	if !ok {
		return code
	}
	return authcmd.RunLogin(ctx, o)
}

// runLogout is `bir-proxy logout`: its room is authcmd.
func runLogout(ctx context.Context, c *cli, args []string) int {
	o, code, ok := c.authOptions("logout", args)
	if !ok {
		return code
	}
	return authcmd.RunLogout(ctx, o)
}

// runAuth is `bir-proxy auth`: its room is authcmd.
func runAuth(_ context.Context, c *cli, args []string) int {
	o, code, ok := c.authOptions("auth", args)
	if !ok {
		return code
	}
	return authcmd.RunAuth(o)
}

// authOptions parses the arguments of login, logout or auth into authcmd's options.
func (c *cli) authOptions(name string, args []string) (o authcmd.Options, code int, ok bool) {
	sc, _ := findSubcommand(name)
	opts, names, code, ok := c.parseCommand(sc, args, false)
	if !ok {
		return o, code, false
	}
	o = authcmd.Options{Stdout: c.stdout, Stderr: c.stderr, Args: names, ServerName: urlHost}
	o.Flags, _ = opts.(*authcmd.Flags) // auth has none
	return o, 0, true
}
