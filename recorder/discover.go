package recorder

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Environment variables that point the proxy at a recorder (SPEC §5).
const (
	EnvRecorderURL   = "BIR_RECORDER_URL"
	EnvRecorderToken = "BIR_RECORDER_TOKEN"
)

// Where discovery found an endpoint, when not in a file.
const (
	SourceFlag = "--recorder"
	SourceEnv  = EnvRecorderURL
)

// Endpoint is the recorder a proxy reports to.
type Endpoint struct {
	URL   string // base URL without a trailing slash, e.g. http://127.0.0.1:7777
	Token string // sent as "Authorization: Bearer <Token>"
	// Source says where the endpoint was found: SourceFlag, SourceEnv, or the path of
	// the .bir/recorder.json it was read from.
	Source string

	allowRemote bool
	// file is the discovery file to read again when the recorder refuses the token or
	// is gone: a restarted recorder writes its new port and token there.
	file string
	// dir and uid are what file was trusted for (the working directory, the user), so
	// that a re-read checks it as the first read did.
	dir string
	uid int
}

// DiscoverOptions says where Discover looks.
type DiscoverOptions struct {
	Flag        string              // --recorder URL; wins over everything else
	Env         func(string) string // os.Getenv; nil reads no environment
	Dir         string              // where the search for .bir/recorder.json starts; "" skips it
	AllowRemote bool                // --allow-remote-recorder
	// Logger is told why a discovery file was ignored when that is not an error (with
	// --recorder, only the file's token was wanted); nil says nothing.
	Logger *slog.Logger

	uid *int // tests: the user whose files are trusted; nil is os.Getuid()
}

type discoveryFile struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	PID   int    `json:"pid"`
}

// Discover finds the recorder: the flag, else BIR_RECORDER_URL (with
// BIR_RECORDER_TOKEN), else the .bir/recorder.json in Dir or its nearest parent that has
// one. It returns nil and no error when none is configured (the proxy then writes the
// journal). The first source that is set decides; it is not probed, so a recorder
// that is down still gets the reports later, from the spool.
//
// With the flag, the token is BIR_RECORDER_TOKEN, or else the token of the discovery
// file when that file names the same URL.
func Discover(opts DiscoverOptions) (*Endpoint, error) {
	env := opts.Env
	if env == nil {
		env = func(string) string { return "" }
	}
	uid := os.Getuid()
	if opts.uid != nil {
		uid = *opts.uid
	}
	if opts.Flag != "" {
		ep := &Endpoint{URL: opts.Flag, Token: env(EnvRecorderToken), Source: SourceFlag, allowRemote: opts.AllowRemote}
		if ep.Token == "" {
			if path, dir, ok := findDiscoveryFile(opts.Dir); ok {
				df, err := readTrusted(path, dir, uid)
				switch {
				case err != nil:
					if opts.Logger != nil {
						opts.Logger.Warn("not taking the recorder token from the discovery file", "err", err)
					}
				case sameURL(df.URL, opts.Flag):
					ep.Token, ep.file, ep.dir, ep.uid = df.Token, path, dir, uid
				}
			}
		}
		return ep.checked()
	}
	if u := env(EnvRecorderURL); u != "" {
		ep := &Endpoint{URL: u, Token: env(EnvRecorderToken), Source: SourceEnv, allowRemote: opts.AllowRemote}
		return ep.checked()
	}
	if path, dir, ok := findDiscoveryFile(opts.Dir); ok {
		return endpointFromFile(path, dir, uid, opts.AllowRemote)
	}
	return nil, nil
}

// reload reads the discovery file again, for an endpoint that came from one; any other
// endpoint is returned as it is.
func (e *Endpoint) reload() (*Endpoint, error) {
	if e.file == "" {
		return e, nil
	}
	if e.Source == SourceFlag {
		// The URL is the user's; only the token may have moved on.
		df, err := readTrusted(e.file, e.dir, e.uid)
		if err != nil {
			return e, err
		}
		if !sameURL(df.URL, e.URL) {
			return e, nil
		}
		fresh := *e
		fresh.Token = df.Token
		return &fresh, nil
	}
	return endpointFromFile(e.file, e.dir, e.uid, e.allowRemote)
}

func endpointFromFile(path, dir string, uid int, allowRemote bool) (*Endpoint, error) {
	df, err := readTrusted(path, dir, uid)
	if err != nil {
		return nil, err
	}
	if df.URL == "" {
		return nil, fmt.Errorf("recorder discovery file %s has no url", path)
	}
	ep := &Endpoint{URL: df.URL, Token: df.Token, Source: path, allowRemote: allowRemote, file: path, dir: dir, uid: uid}
	return ep.checked()
}

// findDiscoveryFile looks for .bir/recorder.json in dir and then in each parent, and
// returns its path and dir made absolute. A symbolic link counts as found (and is then
// refused by readTrusted, with the reason), so that it cannot hide a file further up.
func findDiscoveryFile(dir string) (path, abs string, ok bool) {
	if dir == "" {
		return "", "", false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", false
	}
	for d := abs; ; {
		path := filepath.Join(d, ".bir", "recorder.json")
		if st, err := os.Lstat(path); err == nil && (st.Mode().IsRegular() || st.Mode()&os.ModeSymlink != 0) {
			return path, abs, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", "", false
		}
		d = parent
	}
}

// readTrusted reads the discovery file at path, found from the working directory dir,
// if it is trusted (checkTrust).
func readTrusted(path, dir string, uid int) (discoveryFile, error) {
	if err := checkTrust(path, dir, uid); err != nil {
		return discoveryFile{}, fmt.Errorf("recorder discovery file %s is not trusted: %w", path, err)
	}
	return readDiscoveryFile(path)
}

func readDiscoveryFile(path string) (discoveryFile, error) {
	var df discoveryFile
	b, err := os.ReadFile(path)
	if err != nil {
		return df, fmt.Errorf("read recorder discovery file: %w", err)
	}
	if err := json.Unmarshal(b, &df); err != nil {
		return df, fmt.Errorf("parse recorder discovery file %s: %w", path, err)
	}
	return df, nil
}

// checked validates the URL and applies the loopback rule: the token must not travel
// to another machine unless the user said so.
func (e *Endpoint) checked() (*Endpoint, error) {
	u, err := url.Parse(e.URL)
	if err != nil {
		return nil, fmt.Errorf("recorder URL %q (from %s): %w", e.URL, e.Source, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("recorder URL %q (from %s): scheme must be http or https", e.URL, e.Source)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("recorder URL %q (from %s): no host", e.URL, e.Source)
	}
	if !e.allowRemote && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("recorder URL %q (from %s) is not a loopback address (127.0.0.0/8, ::1, localhost); "+
			"pass --allow-remote-recorder to report to another host", e.URL, e.Source)
	}
	u.RawQuery, u.Fragment = "", ""
	e.URL = strings.TrimRight(u.String(), "/")
	return e, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

func sameURL(a, b string) bool {
	norm := func(s string) string {
		u, err := url.Parse(s)
		if err != nil {
			return s
		}
		u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
		return strings.TrimRight(u.String(), "/")
	}
	return norm(a) == norm(b)
}
