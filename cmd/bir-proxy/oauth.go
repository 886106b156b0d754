package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/oauth"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/upstream"
)

// oauthFlags are the OAuth flags of the proxy and of login/logout.
type oauthFlags struct {
	clientID          string
	clientSecret      string // ${VAR} expanded, so a wrapped entry can keep the secret out of the file
	clientMetadataURL string
	port              int
	scope             string
	wait              time.Duration
	off               bool
}

func defineOAuthFlags(fs *flag.FlagSet, proxy bool) *oauthFlags {
	o := &oauthFlags{}
	fs.StringVar(&o.clientID, "client-id", "", "with --url: an OAuth client registered beforehand with the server's authorization server")
	fs.StringVar(&o.clientSecret, "client-secret", "", "with --client-id: its secret, if it has one (${VAR} is expanded; keep it out of files)")
	fs.StringVar(&o.clientMetadataURL, "client-metadata-url", "", "with --url: the https URL of an OAuth Client ID Metadata Document to sign in as")
	fs.IntVar(&o.port, "oauth-port", oauth.DefaultCallbackPort, "with --url: the loopback port of the OAuth sign-in's redirect URI (http://127.0.0.1:PORT/callback)")
	fs.StringVar(&o.scope, "oauth-scope", "", "with --url: the OAuth scopes to ask for, space-separated (default: those the server names)")
	if proxy {
		fs.DurationVar(&o.wait, "oauth-wait", oauth.DefaultWait, "with --url: how long a request waits for an OAuth sign-in before it is answered with an error (the sign-in goes on)")
		fs.BoolVar(&o.off, "no-oauth", false, "with --url: never sign in; a 401 is an error")
	}
	return o
}

// client is the OAuth client of the server at serverURL (expanded); shownURL is how
// the user gave it.
func (o *oauthFlags) client(serverURL, shownURL, name string, hc *http.Client, logger *slog.Logger, notes io.Writer) (*oauth.Client, error) {
	store, err := oauth.OpenStore("")
	if err != nil {
		return nil, err
	}
	secret, err := upstream.Expand(o.clientSecret, "--client-secret", os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if secret != "" && o.clientID == "" {
		return nil, errors.New("--client-secret goes with --client-id")
	}
	return oauth.New(oauth.Options{
		ServerURL:         serverURL,
		Name:              name,
		ShownURL:          shownURL,
		ClientID:          o.clientID,
		ClientSecret:      secret,
		ClientMetadataURL: o.clientMetadataURL,
		Scopes:            strings.Fields(o.scope),
		CallbackPort:      o.port,
		Store:             store,
		HTTPClient:        hc,
		Notify:            notes,
		Logger:            logger,
		Wait:              o.wait,
	})
}

// withOAuth gives r an OAuth client, unless --no-oauth or an Authorization header
// (which wins). The client is closed by the returned func.
func (f *proxyFlags) withOAuth(r *upstream.Remote, logger *slog.Logger, notes io.Writer) (closeFn func(), err error) {
	if f.oauth.off || r.Header.Get("Authorization") != "" {
		return func() {}, nil
	}
	if r.Client == nil {
		r.Client = upstream.NewHTTPClient(f.connectTimeout)
	}
	c, err := f.oauth.client(r.URL, redact.URL(f.url), f.server, r.Client, logger, notes)
	if err != nil {
		return nil, fmt.Errorf("OAuth: %w", err)
	}
	r.Auth = c
	c.Preload() // while the host starts up, not on its first request
	return c.Close, nil
}

type loginFlags struct {
	url     string
	timeout time.Duration
	oauth   *oauthFlags
}

func defineLoginFlags(fs *flag.FlagSet, withClient bool) *loginFlags {
	l := &loginFlags{}
	fs.StringVar(&l.url, "url", "", "the MCP server's URL, as given to bir-proxy --url (${VAR} is expanded)")
	if withClient {
		fs.DurationVar(&l.timeout, "timeout", 5*time.Minute, "how long to wait for the browser")
		l.oauth = defineOAuthFlags(fs, false)
	}
	return l
}

func runLogin(ctx context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("login")
	opts, names, code, ok := c.parseCommand(sc, args, false)
	if !ok {
		return code
	}
	l := opts.(*loginFlags)
	if l.url == "" || len(names) > 0 {
		return c.usageError("login", errors.New("give the server with --url URL"))
	}
	u, err := upstream.Expand(l.url, "--url", os.LookupEnv)
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy login: %v\n", err)
		return 1
	}
	// The OAuth client's lines do not name the server: its log does.
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("server", urlHost(u))
	l.oauth.wait = -1
	cl, err := l.oauth.client(u, redact.URL(l.url), urlHost(u), upstream.NewHTTPClient(0), logger, c.stderr)
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy login: %v\n", err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := cl.Login(ctx); err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy login: %s: %v\n", redact.URL(l.url), err)
		return 1
	}
	fmt.Fprintf(c.stdout, "signed in to %s\n", redact.URL(cl.Resource()))
	return 0
}

func runLogout(ctx context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("logout")
	opts, names, code, ok := c.parseCommand(sc, args, false)
	if !ok {
		return code
	}
	l := opts.(*loginFlags)
	if l.url == "" || len(names) > 0 {
		return c.usageError("logout", errors.New("give the server with --url URL"))
	}
	u, err := upstream.Expand(l.url, "--url", os.LookupEnv)
	if err == nil {
		u, err = oauth.CanonicalURI(u)
	}
	var store *oauth.Store
	if err == nil {
		store, err = oauth.OpenStore("")
	}
	var gone bool
	if err == nil {
		// A running proxy's refresh holds the lock for one token request (bounded
		// at 30 s); past a minute something is wrong, and saying so beats waiting.
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		gone, err = store.Delete(lctx, u)
		cancel()
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy logout: %v\n", err)
		return 1
	}
	if gone {
		fmt.Fprintf(c.stdout, "signed out of %s (the stored grant and client registration are deleted)\n", redact.URL(u))
	} else {
		fmt.Fprintf(c.stdout, "no grant was stored for %s\n", redact.URL(u))
	}
	return 0
}

func runAuth(_ context.Context, c *cli, args []string) int {
	sc, _ := findSubcommand("auth")
	_, names, code, ok := c.parseCommand(sc, args, false)
	if !ok {
		return code
	}
	if len(names) != 1 || names[0] != "status" {
		return c.usageError("auth", errors.New("the one auth command is: bir-proxy auth status"))
	}
	store, err := oauth.OpenStore("")
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy auth: %v\n", err)
		return 1
	}
	list, err := store.List()
	if err != nil {
		fmt.Fprintf(c.stderr, "bir-proxy auth: %v\n", err)
		return 1
	}
	fmt.Fprintf(c.stdout, "OAuth grants in %s:\n", store.Dir())
	if len(list) == 0 {
		fmt.Fprintln(c.stdout, "  none")
	}
	now := time.Now()
	for _, e := range list {
		state := "no token (signed out, or the sign-in did not finish)"
		if t := e.Token; t != nil {
			switch {
			case t.Expiry.IsZero():
				state = "token with no stated expiry"
			case now.After(t.Expiry):
				state = "token expired " + now.Sub(t.Expiry).Round(time.Second).String() + " ago"
			default:
				state = "token valid for " + t.Expiry.Sub(now).Round(time.Second).String()
			}
			if t.RefreshToken != "" {
				state += ", refreshable"
			}
		}
		fmt.Fprintf(c.stdout, "  %s\n    %s\n", redact.URL(e.ServerURL), state)
		if e.Token != nil && e.Token.Scope != "" {
			fmt.Fprintf(c.stdout, "    scopes: %s\n", e.Token.Scope)
		}
		if e.Client != nil {
			fmt.Fprintf(c.stdout, "    client: %s (%s) at %s, redirect %s\n", e.Client.ID, e.Client.Kind, e.Client.Issuer, e.Client.RedirectURI)
		}
		fmt.Fprintf(c.stdout, "    updated %s\n", e.Updated.Local().Format(time.RFC3339))
	}
	return 0
}
