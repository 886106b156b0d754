// Package authcmd is `bir-proxy login`, `logout` and `auth status`: signing in to a
// remote server with OAuth ahead of time, deleting what is stored for it, and listing
// the stored grants (never their secrets). The OAuth flags it defines are the proxy's
// too (OAuthFlags), and so is the client they make (OAuthFlags.Client).
package authcmd

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

// LoginUsage is login's synopsis.
const LoginUsage = "--url URL [--client-id ID] [--oauth-port N] [flags]"

// LoginAbout is the paragraph under login's usage line.
const LoginAbout = `Signs in to the MCP server at URL with OAuth from a terminal: opens the
browser ($BROWSER, else the system's opener; the URL is printed too) and
stores the token, which every bir-proxy --url of that server then uses.
Give the same client flags as the proxy's (--client-id, --client-metadata-url,
--oauth-port). See docs/oauth.md.`

// LogoutUsage is logout's synopsis.
const LogoutUsage = "--url URL"

// LogoutAbout is the paragraph under logout's usage line.
const LogoutAbout = `Deletes what is stored for the server at URL: its tokens and client
registration. The next bir-proxy --url of it signs in again.`

// AuthUsage is auth's synopsis.
const AuthUsage = "status"

// AuthAbout is the paragraph under auth's usage line.
const AuthAbout = `Lists the OAuth grants bir-proxy keeps, one per server URL: whether the
token is valid and refreshable, its scopes and client. Tokens and secrets
are never shown.`

// OAuthFlags are the OAuth flags of the proxy and of login/logout.
type OAuthFlags struct {
	ClientID          string
	ClientSecret      string // ${VAR} expanded, so a wrapped entry can keep the secret out of the file
	ClientMetadataURL string
	Port              int
	Scope             string
	Wait              time.Duration
	Off               bool
}

// DefineOAuthFlags defines the OAuth flags on fs; proxy adds those only a proxy
// (or a command reaching a server as it does) has: --oauth-wait and --no-oauth.
func DefineOAuthFlags(fs *flag.FlagSet, proxy bool) *OAuthFlags {
	o := &OAuthFlags{}
	fs.StringVar(&o.ClientID, "client-id", "", "with --url: an OAuth client registered beforehand with the server's authorization server")
	fs.StringVar(&o.ClientSecret, "client-secret", "", "with --client-id: its secret, if it has one (${VAR} is expanded; keep it out of files)")
	fs.StringVar(&o.ClientMetadataURL, "client-metadata-url", "", "with --url: the https URL of an OAuth Client ID Metadata Document to sign in as")
	fs.IntVar(&o.Port, "oauth-port", oauth.DefaultCallbackPort, "with --url: the loopback port of the OAuth sign-in's redirect URI (http://127.0.0.1:PORT/callback)")
	fs.StringVar(&o.Scope, "oauth-scope", "", "with --url: the OAuth scopes to ask for, space-separated (default: those the server names)")
	if proxy {
		fs.DurationVar(&o.Wait, "oauth-wait", oauth.DefaultWait, "with --url: how long a request waits for an OAuth sign-in before it is answered with an error (the sign-in goes on)")
		fs.BoolVar(&o.Off, "no-oauth", false, "with --url: never sign in; a 401 is an error")
	}
	return o
}

// Client is the OAuth client of the server at serverURL (expanded); shownURL is how
// the user gave it.
func (o *OAuthFlags) Client(serverURL, shownURL, name string, hc *http.Client, logger *slog.Logger, notes io.Writer) (*oauth.Client, error) {
	store, err := oauth.OpenStore("")
	if err != nil {
		return nil, err
	}
	secret, err := upstream.Expand(o.ClientSecret, "--client-secret", os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if secret != "" && o.ClientID == "" {
		return nil, errors.New("--client-secret goes with --client-id")
	}
	return oauth.New(oauth.Options{
		ServerURL:         serverURL,
		Name:              name,
		ShownURL:          shownURL,
		ClientID:          o.ClientID,
		ClientSecret:      secret,
		ClientMetadataURL: o.ClientMetadataURL,
		Scopes:            strings.Fields(o.Scope),
		CallbackPort:      o.Port,
		Store:             store,
		HTTPClient:        hc,
		Notify:            notes,
		Logger:            logger,
		Wait:              o.Wait,
	})
}

// Flags are login's and logout's flags.
type Flags struct {
	URL     string
	Timeout time.Duration
	OAuth   *OAuthFlags // login's only
}

// DefineFlags defines login's flags on fs (withClient) or logout's.
func DefineFlags(fs *flag.FlagSet, withClient bool) *Flags {
	l := &Flags{}
	fs.StringVar(&l.URL, "url", "", "the MCP server's URL, as given to bir-proxy --url (${VAR} is expanded)")
	if withClient {
		fs.DurationVar(&l.Timeout, "timeout", 5*time.Minute, "how long to wait for the browser")
		l.OAuth = DefineOAuthFlags(fs, false)
	}
	return l
}

// Options are what the commands run with.
type Options struct {
	Stdout, Stderr io.Writer
	Flags          *Flags   // login's and logout's; auth has none
	Args           []string // the words after the flags: none for login and logout, "status" for auth
	// ServerName is a server's name from its URL, as the proxy names it by
	// default (login's notes and log lines say it).
	ServerName func(url string) string
}

// usageError says what was wrong with the command line in one line on stderr and
// returns the exit status for it, 2.
func (o Options) usageError(cmd string, err error) int {
	fmt.Fprintf(o.Stderr, "bir-proxy %s: %s (see bir-proxy help %s)\n", cmd, strings.TrimSpace(err.Error()), cmd)
	return 2
}

// RunLogin is `bir-proxy login`; it returns the exit status: 0, 1 when the sign-in
// failed, 2 for a usage error.
func RunLogin(ctx context.Context, opts Options) int {
	l := opts.Flags
	if l.URL == "" || len(opts.Args) > 0 {
		return opts.usageError("login", errors.New("give the server with --url URL"))
	}
	u, err := upstream.Expand(l.URL, "--url", os.LookupEnv)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "bir-proxy login: %v\n", err)
		return 1
	}
	name := opts.ServerName(u)
	// The OAuth client's lines do not name the server: its log does.
	logger := slog.New(slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("server", name)
	l.OAuth.Wait = -1
	cl, err := l.OAuth.Client(u, redact.URL(l.URL), name, upstream.NewHTTPClient(0), logger, opts.Stderr)
	if err != nil {
		fmt.Fprintf(opts.Stderr, "bir-proxy login: %v\n", err)
		return 1
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	if err := cl.Login(ctx); err != nil {
		fmt.Fprintf(opts.Stderr, "bir-proxy login: %s: %v\n", redact.URL(l.URL), err)
		return 1
	}
	fmt.Fprintf(opts.Stdout, "signed in to %s\n", redact.URL(cl.Resource()))
	return 0
}

// RunLogout is `bir-proxy logout`; it returns the exit status: 0 (whether or not a
// grant was stored), 1 when the store could not be changed, 2 for a usage error.
func RunLogout(ctx context.Context, opts Options) int {
	l := opts.Flags
	if l.URL == "" || len(opts.Args) > 0 {
		return opts.usageError("logout", errors.New("give the server with --url URL"))
	}
	u, err := upstream.Expand(l.URL, "--url", os.LookupEnv)
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
		fmt.Fprintf(opts.Stderr, "bir-proxy logout: %v\n", err)
		return 1
	}
	if gone {
		fmt.Fprintf(opts.Stdout, "signed out of %s (the stored grant and client registration are deleted)\n", redact.URL(u))
	} else {
		fmt.Fprintf(opts.Stdout, "no grant was stored for %s\n", redact.URL(u))
	}
	return 0
}

// RunAuth is `bir-proxy auth status`; it returns the exit status: 0, 1 when the
// store could not be read, 2 for a usage error.
func RunAuth(opts Options) int {
	if len(opts.Args) != 1 || opts.Args[0] != "status" {
		return opts.usageError("auth", errors.New("the one auth command is: bir-proxy auth status"))
	}
	store, err := oauth.OpenStore("")
	if err != nil {
		fmt.Fprintf(opts.Stderr, "bir-proxy auth: %v\n", err)
		return 1
	}
	list, err := store.List()
	if err != nil {
		fmt.Fprintf(opts.Stderr, "bir-proxy auth: %v\n", err)
		return 1
	}
	w := opts.Stdout
	fmt.Fprintf(w, "OAuth grants in %s:\n", store.Dir())
	if len(list) == 0 {
		fmt.Fprintln(w, "  none")
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
		fmt.Fprintf(w, "  %s\n    %s\n", redact.URL(e.ServerURL), state)
		if e.Token != nil && e.Token.Scope != "" {
			fmt.Fprintf(w, "    scopes: %s\n", e.Token.Scope)
		}
		if e.Client != nil {
			fmt.Fprintf(w, "    client: %s (%s) at %s, redirect %s\n", e.Client.ID, e.Client.Kind, e.Client.Issuer, e.Client.RedirectURI)
		}
		fmt.Fprintf(w, "    updated %s\n", e.Updated.Local().Format(time.RFC3339))
	}
	return 0
}
