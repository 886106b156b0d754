package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/internal/filelock"
)

// Client identities, in the spec's order of preference.
const (
	KindPreRegistered = "pre-registered"
	KindMetadataDoc   = "client-id-metadata-document"
	KindDynamic       = "dynamic-registration"
)

// ClientInfo is the client's identity at the authorization server.
type ClientInfo struct {
	Kind        string `json:"kind"`
	ID          string `json:"client_id"`
	Secret      string `json:"client_secret,omitempty"`
	AuthMethod  string `json:"token_endpoint_auth_method,omitempty"` // none, client_secret_basic, client_secret_post
	RedirectURI string `json:"redirect_uri"`
	Issuer      string `json:"issuer"`
}

// Token is a grant: the access token and what renews it.
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"` // zero: the server gave no lifetime
	Issued       time.Time `json:"issued,omitzero"`
	Scope        string    `json:"scope,omitempty"`
}

// expired reports whether the token is expired, or will be within skew. The skew is
// at most a quarter of the token's lifetime: a token that lives less than the skew
// would otherwise be refreshed before every request.
func (t *Token) expired(now time.Time, skew time.Duration) bool {
	if t == nil || t.Expiry.IsZero() {
		return false
	}
	if !t.Issued.IsZero() {
		skew = min(skew, t.Expiry.Sub(t.Issued)/4)
	}
	return now.Add(skew).After(t.Expiry)
}

// Entry is what the store keeps for one MCP server URL.
type Entry struct {
	ServerURL string          `json:"server_url"` // canonical: the key and the RFC 8707 resource
	Server    *ServerMetadata `json:"authorization_server,omitempty"`
	Client    *ClientInfo     `json:"client,omitempty"`
	Token     *Token          `json:"token,omitempty"`
	// Scopes are those asked for so far: a step-up asks for their union with the
	// challenge's (2026-07-28: the client accumulates, the server names only what the
	// operation needs).
	Scopes  []string  `json:"scopes,omitempty"`
	Updated time.Time `json:"updated"`
}

// Store is the token store: one file per MCP server URL (never per port or process),
// 0600 in a 0700 directory, replaced atomically, with a lock file beside it that the
// processes using that server take to change it.
type Store struct{ dir string }

// DefaultDir is where tokens are kept: $XDG_CONFIG_HOME/bir-proxy/oauth when set (on
// every system, as the state directory honours XDG_STATE_HOME), else the user's
// configuration directory's bir-proxy/oauth (~/.config, ~/Library/Application Support,
// %AppData%).
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "bir-proxy", "oauth"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the configuration directory for the OAuth tokens: %w", err)
	}
	return filepath.Join(d, "bir-proxy", "oauth"), nil
}

// OpenStore opens (and creates, 0700) the store in dir; "" is DefaultDir. A directory
// (or the directory holding it) that another user owns is refused, by the rule that
// refuses a .bir/recorder.json (recorder/trust_unix.go): owned by you or root.
func OpenStore(dir string) (*Store, error) { return openStore(dir, os.Getuid()) }

// openStore is OpenStore for the user uid (tests: another user than the one running).
func openStore(dir string, uid int) (*Store, error) {
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the OAuth token directory: %w", err)
	}
	if runtime.GOOS != "windows" {
		// Its owner could read every token, whatever the mode; the owner of the
		// directory above could swap it for one of theirs.
		for _, d := range []string{filepath.Dir(dir), dir} {
			st, err := os.Stat(d)
			if err != nil {
				return nil, fmt.Errorf("the OAuth token directory: %w", err)
			}
			if owner, ok := fileOwner(st); ok && owner != uid && owner != 0 {
				return nil, fmt.Errorf("the OAuth token directory: %s is owned by uid %d, not by you (uid %d) or root: its owner could read or replace every token in it; remove it or give it back (chown)", d, owner, uid)
			}
		}
		// MkdirAll leaves an existing directory's mode alone: one left open to others
		// would let them read every token.
		if st, err := os.Stat(dir); err == nil && st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(dir, 0o700); err != nil {
				return nil, fmt.Errorf("make the OAuth token directory %s private: %w", dir, err)
			}
		}
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) base(serverURL string) string {
	sum := sha256.Sum256([]byte(serverURL))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:12]))
}

// Load reads the entry of serverURL (canonical); nil when there is none. Reads need no
// lock: writes replace the file with a rename, so a reader sees one whole version.
func (s *Store) Load(serverURL string) (*Entry, error) {
	b, err := readPrivate(s.base(serverURL) + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stored OAuth grant: %w", err)
	}
	e, ok := decodeEntry(b)
	if !ok || e.ServerURL != serverURL {
		// A damaged file (or a hash collision, which would be a first) is not used:
		// the next sign-in replaces it.
		return nil, nil
	}
	return e, nil
}

// decodeEntry reads a stored entry with gjson rather than encoding/json: a proxy
// reads its grant once, at start, and encoding/json's first decode of a type (its
// reflection) cost that start ~200 µs, measured (docs/PERFORMANCE.md).
func decodeEntry(b []byte) (*Entry, bool) {
	// gjson recurses once per level of nesting, with no limit: a damaged (or planted)
	// file of a million '[' would overflow the stack, which is fatal, not an error.
	if checkPeerJSON(b) != nil {
		return nil, false
	}
	r := gjson.ParseBytes(b)
	if !r.IsObject() {
		return nil, false
	}
	strs := func(v gjson.Result) []string {
		var out []string
		for _, x := range v.Array() {
			out = append(out, x.String())
		}
		return out
	}
	tm := func(v gjson.Result) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, v.String())
		return t
	}
	e := &Entry{ServerURL: r.Get("server_url").String(), Scopes: strs(r.Get("scopes")), Updated: tm(r.Get("updated"))}
	if a := r.Get("authorization_server"); a.IsObject() {
		e.Server = &ServerMetadata{
			Issuer:                            a.Get("issuer").String(),
			AuthorizationEndpoint:             a.Get("authorization_endpoint").String(),
			TokenEndpoint:                     a.Get("token_endpoint").String(),
			RegistrationEndpoint:              a.Get("registration_endpoint").String(),
			ScopesSupported:                   strs(a.Get("scopes_supported")),
			CodeChallengeMethodsSupported:     strs(a.Get("code_challenge_methods_supported")),
			TokenEndpointAuthMethodsSupported: strs(a.Get("token_endpoint_auth_methods_supported")),
			ClientIDMetadataDocumentSupported: a.Get("client_id_metadata_document_supported").Bool(),
			IssParameterSupported:             a.Get("authorization_response_iss_parameter_supported").Bool(),
		}
	}
	if c := r.Get("client"); c.IsObject() {
		e.Client = &ClientInfo{
			Kind:        c.Get("kind").String(),
			ID:          c.Get("client_id").String(),
			Secret:      c.Get("client_secret").String(),
			AuthMethod:  c.Get("token_endpoint_auth_method").String(),
			RedirectURI: c.Get("redirect_uri").String(),
			Issuer:      c.Get("issuer").String(),
		}
	}
	if t := r.Get("token"); t.IsObject() {
		e.Token = &Token{
			AccessToken:  t.Get("access_token").String(),
			RefreshToken: t.Get("refresh_token").String(),
			Expiry:       tm(t.Get("expiry")),
			Issued:       tm(t.Get("issued")),
			Scope:        t.Get("scope").String(),
		}
		// An older version stored whatever the token endpoint sent. An access token
		// with CR/LF in it fails every request ("invalid header field value") and,
		// being there, no sign-in would ever replace it: it is not a token; the
		// request goes without, and the 401 starts a sign-in. A refresh token with
		// control characters is dropped alone: the access token works till it expires.
		if !b64token(e.Token.AccessToken) {
			e.Token = nil
		} else if e.Token.RefreshToken != "" && !vschars(e.Token.RefreshToken) {
			e.Token.RefreshToken = ""
		}
	}
	return e, true
}

// Save writes e atomically: a 0600 temporary file, synced, renamed over the old one.
func (s *Store) Save(e *Entry) error {
	e.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	path := s.base(e.ServerURL) + ".json"
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("save the OAuth grant: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename: gone already
	if err := f.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		f.Close()
		return fmt.Errorf("save the OAuth grant: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("save the OAuth grant: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save the OAuth grant: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save the OAuth grant: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save the OAuth grant: %w", err)
	}
	filelock.SyncDir(s.dir)
	return nil
}

// Delete removes the entry of serverURL; no entry is no error. It takes the entry's
// lock (waiting until ctx ends): a refresh under way in a running proxy saves its
// result under that lock, and without it would write back the grant just deleted.
func (s *Store) Delete(ctx context.Context, serverURL string) (bool, error) {
	unlock, err := s.Lock(ctx, serverURL)
	if err != nil {
		return false, err
	}
	defer unlock()
	err = os.Remove(s.base(serverURL) + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove the OAuth grant: %w", err)
	}
	os.Remove(s.base(serverURL) + ".pending")
	os.Remove(s.base(serverURL) + ".failed")
	return true, nil
}

// Lock takes the lock of serverURL's entry, waiting until ctx ends; unlock releases it.
// It is held only to read, change and write the entry (a refresh, a registration, the
// code exchange), never while a browser is waited for.
func (s *Store) Lock(ctx context.Context, serverURL string) (unlock func(), err error) {
	f, err := filelock.Wait(ctx, s.base(serverURL)+".lock")
	if err != nil {
		return nil, fmt.Errorf("lock the OAuth grant: %w", err)
	}
	return func() { f.Close() }, nil
}

// tryLock is Lock that does not wait: errBusy when another process holds it.
func (s *Store) tryLock(serverURL string) (unlock func(), err error) {
	f, err := filelock.Open(s.base(serverURL)+".lock", os.O_RDWR|os.O_CREATE)
	if errors.Is(err, filelock.ErrLocked) {
		return nil, errBusy
	}
	if err != nil {
		return nil, fmt.Errorf("lock the OAuth grant: %w", err)
	}
	return func() { f.Close() }, nil
}

// List is every entry, by server URL.
func (s *Store) List() ([]*Entry, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*Entry
	for _, n := range names {
		b, err := readPrivate(n)
		if err != nil {
			continue
		}
		if e, ok := decodeEntry(b); ok && e.ServerURL != "" {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ServerURL < out[j].ServerURL })
	return out, nil
}

// setPending notes the authorization URL of a sign-in under way, so that another
// process waiting for it (or `bir-proxy login`) can show it to the user. It holds no
// secret: state and the code challenge are useless without the verifier and the
// callback port.
func (s *Store) setPending(serverURL, authURL string) {
	p := s.base(serverURL) + ".pending"
	if authURL == "" {
		os.Remove(p)
		return
	}
	s.replace(p, []byte(authURL))
}

// replace writes b to path through a temporary file of a random name, created
// O_EXCL (never one planted there, link or not: the fixed name ".pending.tmp" was
// written through a planted symbolic link), renamed over path (rename replaces a
// link there, it does not follow it). Best effort: these files only inform.
func (s *Store) replace(path string, b []byte) {
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}

// signInFailure is a sign-in that failed, as kept beside the entry (.failed) for
// every process of the user: none signs in again before Until unless the stored
// token is no longer the one whose hash is Token (someone signed in since).
type signInFailure struct {
	Error string    `json:"error"`
	Until time.Time `json:"until"`
	Token string    `json:"token_sha256,omitempty"`
}

func (f *signInFailure) err() error { return errors.New(f.Error) }

// tokenSum is what a signInFailure keeps of the access token (never the token:
// the file is only an error message and a time).
func tokenSum(access string) string {
	if access == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(access))
	return hex.EncodeToString(sum[:12])
}

// setFailure notes f for the other processes (nil: the sign-in worked, forget it).
func (s *Store) setFailure(serverURL string, f *signInFailure) {
	p := s.base(serverURL) + ".failed"
	if f == nil {
		os.Remove(p)
		return
	}
	b, err := json.Marshal(f)
	if err == nil {
		s.replace(p, b)
	}
}

// failure is the failed sign-in noted for serverURL whose pause is not over, or nil.
func (s *Store) failure(serverURL string, now time.Time) *signInFailure {
	b, err := readPrivate(s.base(serverURL) + ".failed")
	if err != nil {
		return nil
	}
	var f signInFailure
	// One that ends past the longest pause is not ours to obey (a clock set back, a
	// file planted): it would hold every sign-in until then.
	if decodePeerJSON(b, &f) != nil || f.Error == "" || !now.Before(f.Until) || f.Until.After(now.Add(signInPauseMax)) {
		return nil
	}
	return &f
}

// pending is the authorization URL of a sign-in under way, or "".
func (s *Store) pending(serverURL string) string {
	b, _ := readPrivate(s.base(serverURL) + ".pending")
	return strings.TrimSpace(string(b))
}

// entryCap bounds a store file read: an entry is a few kilobytes.
const entryCap = 4 << 20

// readPrivate reads a file of the store, not through a symbolic link (`login` opens
// the pending file's URL in the browser; an entry holds tokens), and at most
// entryCap bytes (more is an error: no entry is that big).
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, entryCap+1))
	if err == nil && len(b) > entryCap {
		err = fmt.Errorf("%s is over %d bytes", path, entryCap)
	}
	return b, err
}
