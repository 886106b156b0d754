package oauth

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"
)

func TestStoreFilesArePrivateAndAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oauth")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &Entry{ServerURL: "https://h/mcp", Token: &Token{AccessToken: "a", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)}}
	if err := s.Save(e); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("https://h/mcp")
	if err != nil || got == nil || got.Token.RefreshToken != "r" {
		t.Fatalf("Load: %+v, %v", got, err)
	}
	if other, _ := s.Load("https://h/other"); other != nil {
		t.Errorf("another URL's entry: %+v", other)
	}
	if runtime.GOOS != "windows" {
		st, _ := os.Stat(dir)
		if st.Mode().Perm() != 0o700 {
			t.Errorf("directory mode %v, want 0700 (it was made 0755 before)", st.Mode().Perm())
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			st, _ := os.Stat(f)
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}
	list, _ := s.List()
	if len(list) != 1 || list[0].ServerURL != "https://h/mcp" {
		t.Errorf("List: %+v", list)
	}
	// While the entry is locked (a refresh under way elsewhere) Delete waits: here
	// until its context ends, and the entry is still there.
	unlock, err := s.Lock(context.Background(), "https://h/mcp")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if gone, err := s.Delete(ctx, "https://h/mcp"); gone || err == nil {
		t.Errorf("Delete under another's lock: %v %v, want it to wait and fail", gone, err)
	}
	cancel()
	if e, err := s.Load("https://h/mcp"); e == nil || err != nil {
		t.Errorf("the entry went while locked: %v %v", e, err)
	}
	unlock()
	if gone, err := s.Delete(context.Background(), "https://h/mcp"); !gone || err != nil {
		t.Errorf("Delete: %v %v", gone, err)
	}
	if gone, _ := s.Delete(context.Background(), "https://h/mcp"); gone {
		t.Error("deleted twice")
	}
}

func TestStoreLockIsExclusive(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	unlock, err := s.Lock(ctx, "https://h/mcp")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(short, "https://h/mcp"); err == nil {
		t.Fatal("a second lock was given while the first is held")
	}
	// Another server's entry has its own lock.
	u2, err := s.Lock(ctx, "https://h/other")
	if err != nil {
		t.Fatal(err)
	}
	u2()
	unlock()
	u3, err := s.Lock(ctx, "https://h/mcp")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	u3()
}

func TestTokenSkewIsBoundedByLifetime(t *testing.T) {
	now := time.Now()
	short := &Token{Issued: now, Expiry: now.Add(2 * time.Second)}
	if short.expired(now, refreshSkew) {
		t.Error("a fresh 2 s token counts as expiring: it would be refreshed before every request")
	}
	if !short.expired(now.Add(1600*time.Millisecond), refreshSkew) {
		t.Error("a 2 s token in its last quarter is not refreshed ahead")
	}
	long := &Token{Issued: now, Expiry: now.Add(time.Hour)}
	if long.expired(now.Add(59*time.Minute), 0) || !long.expired(now.Add(59*time.Minute+31*time.Second), refreshSkew) {
		t.Error("an hour's token: refreshed 30 s ahead")
	}
	if (&Token{}).expired(now, refreshSkew) {
		t.Error("a token without an expiry expired")
	}
}

// TestDecodeEntryMatchesEncoding: the gjson reader gives back every field Save wrote.
func TestDecodeEntryMatchesEncoding(t *testing.T) {
	now := time.Now().UTC().Round(time.Millisecond)
	e := &Entry{ServerURL: "https://h/mcp", Scopes: []string{"a", "b"},
		Server: &ServerMetadata{Issuer: "https://as", AuthorizationEndpoint: "https://as/a", TokenEndpoint: "https://as/t",
			RegistrationEndpoint: "https://as/r", ScopesSupported: []string{"x"}, CodeChallengeMethodsSupported: []string{"S256"},
			TokenEndpointAuthMethodsSupported: []string{"none"}, ClientIDMetadataDocumentSupported: true, IssParameterSupported: true},
		Client: &ClientInfo{Kind: KindDynamic, ID: "c", Secret: "s", AuthMethod: "client_secret_post", RedirectURI: "http://127.0.0.1:1/callback", Issuer: "https://as"},
		Token:  &Token{AccessToken: "A", RefreshToken: "R", Expiry: now.Add(time.Hour), Issued: now, Scope: "a b"}}
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(e); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("https://h/mcp")
	if err != nil || got == nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Errorf("decoded\n %+v\nwant\n %+v", got, e)
	}
	for _, bad := range []string{"", "[]", "{", `{"server_url":1}`} {
		if d, ok := decodeEntry([]byte(bad)); ok && d.ServerURL == "https://h/mcp" {
			t.Errorf("decodeEntry(%q) = %+v", bad, d)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte(`{"server_url":"https://h/mcp","token":{"access_token":"a","expiry":"2026-01-01T00:00:00Z"},"scopes":["a"]}`))
	f.Add([]byte(`{"client":{"client_id":1},"authorization_server":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeEntry(b) // never panics, whatever is in the file
	})
}
