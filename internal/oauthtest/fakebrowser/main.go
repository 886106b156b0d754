// Command fakebrowser stands in for a browser in OAuth tests, by the BROWSER
// convention: a program given the authorization URL as its one argument.
//
//	BROWSER=/path/to/fakebrowser  →  the proxy runs `fakebrowser URL`
//
// It GETs the URL and follows every redirect, the last one to the client's loopback
// callback included, and exits 0 when the final answer is 2xx (1 otherwise, 2 for
// a usage error), saying why on stderr.
//
// Environment:
//   - FAKEBROWSER_LOG=path: append one line per visit, the URL's host and path
//     (never the query, which carries state and codes), so tests count browser
//     visits; written before the visit, so a failed one counts too.
//   - FAKEBROWSER_DELAY=duration (Go syntax, "300ms"): wait that long first.
//   - FAKEBROWSER_TIMEOUT=duration: give up on the whole visit after this long
//     (default 30s), so a test's browser never hangs.
//   - FAKEBROWSER_PRECONNECT=duration: before the visit, open a connection to the
//     host of the URL's redirect_uri and send nothing on it, as Chrome's speculative
//     preconnect does; it is held that long after the visit (the process waits),
//     then closed. An http.Server's Shutdown waits for such a connection (new, not
//     idle) while its listener is already closed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: fakebrowser URL")
		return 2
	}
	target, err := url.Parse(args[0])
	if err != nil || !target.IsAbs() || target.Host == "" {
		fmt.Fprintf(os.Stderr, "fakebrowser: %q is not an absolute URL\n", redact(args[0]))
		return 2
	}
	delay, err := envDuration("FAKEBROWSER_DELAY", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakebrowser:", err)
		return 2
	}
	timeout, err := envDuration("FAKEBROWSER_TIMEOUT", 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakebrowser:", err)
		return 2
	}
	if path := os.Getenv("FAKEBROWSER_LOG"); path != "" {
		if err := appendLine(path, target.Host+target.EscapedPath()); err != nil {
			fmt.Fprintln(os.Stderr, "fakebrowser:", err)
			return 1
		}
	}
	hold, err := envDuration("FAKEBROWSER_PRECONNECT", 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakebrowser:", err)
		return 2
	}
	if delay > 0 {
		time.Sleep(delay)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if hold > 0 {
		if conn := preconnect(ctx, target); conn != nil {
			defer func() {
				time.Sleep(hold)
				conn.Close()
			}()
		}
	}
	status, final, err := visit(ctx, target.String())
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakebrowser: visiting %s: %v\n", redact(target.String()), err)
		return 1
	}
	if status < 200 || status > 299 {
		fmt.Fprintf(os.Stderr, "fakebrowser: %s answered %d\n", redact(final), status)
		return 1
	}
	return 0
}

// visit GETs u, following redirects as a browser does (http.Client's default: up
// to 10), and returns the last answer's status and URL.
func visit(ctx context.Context, u string) (int, string, error) {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", "text/html,*/*")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			// url.Error repeats the URL, query and all; say only why.
			err = fmt.Errorf("%s %s: %w", ue.Op, redact(ue.URL), ue.Err)
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Request.URL.String(), nil
}

// preconnect opens a connection to the host of target's redirect_uri, or returns
// nil (no such parameter, nothing listening: the visit says what is wrong).
func preconnect(ctx context.Context, target *url.URL) net.Conn {
	r, err := url.Parse(target.Query().Get("redirect_uri"))
	if err != nil || r.Host == "" {
		return nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.Host)
	if err != nil {
		return nil
	}
	return conn
}

// redact drops the query and fragment: an authorization URL's state, a
// callback's code.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	p.RawQuery, p.Fragment, p.RawFragment = "", "", ""
	return p.String()
}

func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return d, nil
}

// appendLine appends line with one write on an O_APPEND file, so several browsers
// started at once never interleave their lines.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the visit log: %w", err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("writing the visit log: %w", err)
	}
	return f.Close()
}
