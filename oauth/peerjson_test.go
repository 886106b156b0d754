package oauth

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// deepJSON is n '[' then n ']': valid JSON, nested n deep.
func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestDeepPeerJSONIsRefused: an authorization server whose metadata or token
// answer nests a megabyte deep gets a failed sign-in that says so; no decoder
// recurses that deep (a stack overflow would end the proxy).
func TestDeepPeerJSONIsRefused(t *testing.T) {
	deep := `{"issuer":` + deepJSON(metadataCap/2-16) + `}`
	t.Run("metadata", func(t *testing.T) {
		a := newScriptedAS(t)
		a.asMeta = func() string { return deep }
		cl := a.client(nil, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cl.Refused(ctx, 401, nil, "")
		if err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Fatalf("Refused: %v; want the metadata refused as too deep", err)
		}
	})
	t.Run("token answer", func(t *testing.T) {
		a := newScriptedAS(t)
		a.token = func(int) (int, string) { return 200, deep }
		cl := a.client(nil, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cl.Refused(ctx, 401, nil, "")
		if err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Fatalf("Refused: %v; want the token answer refused as too deep", err)
		}
	})
	t.Run("token error answer", func(t *testing.T) {
		a := newScriptedAS(t)
		a.token = func(int) (int, string) { return 400, `{"error":` + deepJSON(metadataCap/2-16) + `}` }
		cl := a.client(nil, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cl.Refused(ctx, 401, nil, "")
		if err == nil || !strings.Contains(err.Error(), "HTTP 400") {
			t.Fatalf("Refused: %v; want the refusal, its body unread", err)
		}
	})
}

// TestDeepStoreFileIsNotUsed: a store file nested 1.5 million deep (damaged, or
// planted) is taken for no entry, as any damaged file is; gjson, which read it, has
// no depth limit.
func TestDeepStoreFileIsNotUsed(t *testing.T) {
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const u = "https://h.example/mcp"
	if err := os.WriteFile(st.base(u)+".json", []byte(`{"server_url":"`+u+`","x":`+deepJSON(3<<19)+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, err := st.Load(u); e != nil || err != nil {
		t.Fatalf("Load = %+v, %v; want no entry", e, err)
	}
	if l, err := st.List(); len(l) != 0 || err != nil {
		t.Fatalf("List = %+v, %v; want none", l, err)
	}
}

func TestTooDeep(t *testing.T) {
	for s, want := range map[string]bool{
		deepJSON(maxPeerDepth):                    false,
		deepJSON(maxPeerDepth + 1):                true,
		`{"a":"` + deepJSON(100) + `"}`:           false, // in a string: not nesting
		`{"a":"\"[[[[","b":[[]]}`:                 false,
		`[` + strings.Repeat(`[],`, 1000) + `[]]`: false,
	} {
		if got := tooDeep([]byte(s), maxPeerDepth); got != want {
			t.Errorf("tooDeep(%.40q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzPeerJSON: whatever an authorization server sends as a token answer, a
// metadata document or an error, and whatever a store file holds, is read without a
// panic or a stack overflow, and a token accepted is one a header can carry.
func FuzzPeerJSON(f *testing.F) {
	f.Add([]byte(`{"access_token":"a.b-c","token_type":"Bearer","expires_in":"60","refresh_token":"r r","scope":"x y"}`))
	f.Add([]byte(`{"access_token":"a\r\nb","token_type":"bearer"}`))
	f.Add([]byte(`{"issuer":"https://as","authorization_endpoint":"https://as/a","token_endpoint":"https://as/t","code_challenge_methods_supported":["S256"]}`))
	f.Add([]byte(`{"server_url":"https://h/mcp","token":{"access_token":"a","refresh_token":"r\n"}}`))
	// Nesting depth: one level past the limit, and a hundred thousand.
	f.Add([]byte(deepJSON(maxPeerDepth + 1)))
	f.Add([]byte(`{"access_token":` + deepJSON(100000) + `}`))
	f.Add([]byte(`{"token":{"access_token":` + strings.Repeat(`{"a":`, 100000) + `1` + strings.Repeat(`}`, 100000) + `}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if tok, err := readTokenAnswer(b, time.Now(), nil, nil); err == nil && !b64token(tok.AccessToken) {
			t.Fatalf("accepted the access token %q", tok.AccessToken)
		}
		var m ServerMetadata
		_ = decodePeerJSON(b, &m)
		var r ResourceMetadata
		_ = decodePeerJSON(b, &r)
		if e, ok := decodeEntry(b); ok && e.Token != nil && !b64token(e.Token.AccessToken) {
			t.Fatalf("a stored access token %q is used", e.Token.AccessToken)
		}
	})
}
