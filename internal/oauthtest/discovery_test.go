package oauthtest

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// docServer serves CIMD documents for a test on 127.0.0.1.
type docServer struct {
	URL string
	mu  sync.Mutex
	doc map[string]string // path -> JSON
	hdr map[string]string // path -> Cache-Control
}

func startDocServer(t *testing.T) *docServer {
	t.Helper()
	d := &docServer{doc: map[string]string{}, hdr: map[string]string{}}
	cb := startCallbackHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		body, ok := d.doc[r.URL.Path]
		cc := d.hdr[r.URL.Path]
		d.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	d.URL = cb
	return d
}

func (d *docServer) set(path, body, cacheControl string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.doc[path] = body
	d.hdr[path] = cacheControl
	return d.URL + path
}

func TestCIMD(t *testing.T) {
	s := Start(t, Options{CIMD: true})
	h := newHand(t, s)
	docs := startDocServer(t)
	md := h.getJSON(s.Issuer + "/.well-known/oauth-authorization-server")
	if md["client_id_metadata_document_supported"] != true {
		t.Fatalf("metadata %v lacks client_id_metadata_document_supported", md)
	}
	id := docs.URL + "/client.json"
	docs.set("/client.json", `{"client_id":"`+id+`","client_name":"hand","redirect_uris":["`+h.cb.URL+`"],"token_endpoint_auth_method":"none"}`, "")
	h.clientID = id
	at := h.login("")["access_token"].(string)
	if resp, _ := h.mcpPost(at, "", initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("CIMD token: %d", resp.StatusCode)
	}
	h.login("")
	noErrors(t, s)
	if c := s.Counts(); c.CIMDFetches != 2 || c.Registrations != 0 {
		t.Errorf("counts %+v: without cache headers each authorization fetches", c)
	}

	cached := docs.set("/cached.json", `{"client_id":"`+docs.URL+`/cached.json","client_name":"hand","redirect_uris":["`+h.cb.URL+`"]}`, "max-age=600")
	h.clientID = cached
	h.login("")
	h.login("")
	if c := s.Counts(); c.CIMDFetches != 3 {
		t.Errorf("counts %+v: max-age=600 should have kept the document", c)
	}
}

func TestCIMDRefusals(t *testing.T) {
	cases := []struct {
		name, path, doc, violation string
	}{
		{"client_id differs", "/a.json", `{"client_id":"http://elsewhere/a.json","client_name":"x","redirect_uris":["CB"]}`, "is not its URL"},
		{"no client_name", "/b.json", `{"client_id":"ID","redirect_uris":["CB"]}`, "no client_name"},
		{"no redirect_uris", "/c.json", `{"client_id":"ID","client_name":"x"}`, "no redirect_uris"},
		{"redirect not listed", "/d.json", `{"client_id":"ID","client_name":"x","redirect_uris":["http://127.0.0.1:1/other"]}`, "is not registered"},
		{"shared secret", "/e.json", `{"client_id":"ID","client_name":"x","redirect_uris":["CB"],"client_secret":"x"}`, "client_secret"},
		{"not JSON", "/f.json", `<html>`, "not a JSON object"},
		{"missing", "/nothing.json", ``, "status 404"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, Options{CIMD: true})
			h := newHand(t, s)
			docs := startDocServer(t)
			id := docs.URL + tc.path
			if tc.doc != "" {
				doc := strings.ReplaceAll(strings.ReplaceAll(tc.doc, "ID", id), "CB", h.cb.URL)
				docs.set(tc.path, doc, "")
			}
			h.clientID = id
			resp, body := h.get(h.authorizeURL("", nil))
			if resp.StatusCode != http.StatusBadRequest || h.cb.calls() != 0 {
				t.Fatalf("authorize: %d %s, callback calls %d", resp.StatusCode, body, h.cb.calls())
			}
			wantViolation(t, s, tc.violation)
		})
	}
	t.Run("CIMD off", func(t *testing.T) {
		s := Start(t, Options{})
		h := newHand(t, s)
		h.clientID = "http://127.0.0.1:1/client.json"
		if resp, _ := h.get(h.authorizeURL("", nil)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("URL client_id without CIMD: %d", resp.StatusCode)
		}
		wantViolation(t, s, "Options.CIMD off")
		if c := s.Counts(); c.CIMDFetches != 0 {
			t.Errorf("fetched with CIMD off: %+v", c)
		}
	})
	t.Run("bad URLs", func(t *testing.T) {
		s := Start(t, Options{CIMD: true})
		h := newHand(t, s)
		for _, id := range []string{"http://example.com/c.json", "http://127.0.0.1:1", "http://u:p@127.0.0.1:1/c.json", "http://127.0.0.1:1/a/../c.json"} {
			h.clientID = id
			if resp, _ := h.get(h.authorizeURL("", nil)); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("client_id %s: %d", id, resp.StatusCode)
			}
		}
		if c := s.Counts(); c.CIMDFetches != 0 || len(s.Errors()) != 4 {
			t.Errorf("counts %+v, violations %q", c, s.Errors())
		}
	})
}

func TestProtectedResourceMetadataForms(t *testing.T) {
	t.Run("root form, no header", func(t *testing.T) {
		s := Start(t, Options{})
		h := newHand(t, s)
		resp, _ := h.mcpPost("", "", initialize)
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || got != "Bearer" {
			t.Fatalf("401 without metadata in header: %d %q", resp.StatusCode, got)
		}
		base := strings.TrimSuffix(s.MCPURL, "/mcp")
		if resp, _ := h.get(base + "/.well-known/oauth-protected-resource/mcp"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("path form answered %d in root-form mode", resp.StatusCode)
		}
		if prm := h.getJSON(base + "/.well-known/oauth-protected-resource"); prm["resource"] != s.MCPURL {
			t.Errorf("root form %v", prm)
		}
	})
	t.Run("path form in header", func(t *testing.T) {
		s := Start(t, Options{MetadataAtPath: true, MetadataInHeader: true, ChallengeScope: "mcp:read mcp:write"})
		h := newHand(t, s)
		base := strings.TrimSuffix(s.MCPURL, "/mcp")
		if s.ResourceMetadataURL != base+"/.well-known/oauth-protected-resource/mcp" {
			t.Fatalf("metadata URL %s", s.ResourceMetadataURL)
		}
		resp, _ := h.mcpPost("", "", initialize)
		want := `Bearer resource_metadata="` + s.ResourceMetadataURL + `", scope="mcp:read mcp:write"`
		if got := resp.Header.Get("WWW-Authenticate"); got != want {
			t.Fatalf("WWW-Authenticate %s, want %s", got, want)
		}
		if resp, _ := h.get(base + "/.well-known/oauth-protected-resource"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("root form answered %d in path-form mode", resp.StatusCode)
		}
		prm := h.getJSON(s.ResourceMetadataURL)
		if prm["resource"] != s.MCPURL || prm["authorization_servers"].([]any)[0] != s.Issuer {
			t.Errorf("path form %v", prm)
		}
		if sc := prm["scopes_supported"].([]any); len(sc) != 2 || sc[0] != "mcp:read" {
			t.Errorf("scopes_supported %v", sc)
		}
	})
	t.Run("every MCP method is protected", func(t *testing.T) {
		s := Start(t, Options{})
		h := newHand(t, s)
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			req, _ := http.NewRequest(m, s.MCPURL, nil)
			if resp, _ := h.do(req); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s without a token: %d", m, resp.StatusCode)
			}
		}
	})
}

func TestAuthorizationServerMetadataForms(t *testing.T) {
	type probe struct {
		path string
		ok   bool
	}
	cases := []struct {
		name   string
		opt    Options
		probes func(origin string) []probe
	}{
		{"root issuer", Options{}, func(o string) []probe {
			return []probe{{o + "/.well-known/oauth-authorization-server", true}, {o + "/.well-known/openid-configuration", false}}
		}},
		{"path issuer default: only OIDC appending", Options{ASPathIssuer: true}, func(o string) []probe {
			return []probe{
				{o + "/.well-known/oauth-authorization-server/tenant1", false},
				{o + "/.well-known/openid-configuration/tenant1", false},
				{o + "/tenant1/.well-known/openid-configuration", true},
				{o + "/.well-known/oauth-authorization-server", false},
			}
		}},
		{"path issuer RFC 8414 insertion", Options{ASPathIssuer: true, ASMetadata: WellKnownOAuth}, func(o string) []probe {
			return []probe{
				{o + "/.well-known/oauth-authorization-server/tenant1", true},
				{o + "/.well-known/openid-configuration/tenant1", false},
				{o + "/tenant1/.well-known/openid-configuration", false},
			}
		}},
		{"path issuer OIDC insertion", Options{ASPathIssuer: true, ASMetadata: WellKnownOIDCInsert}, func(o string) []probe {
			return []probe{
				{o + "/.well-known/oauth-authorization-server/tenant1", false},
				{o + "/.well-known/openid-configuration/tenant1", true},
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t, tc.opt)
			h := newHand(t, s)
			u, _ := url.Parse(s.Issuer)
			if tc.opt.ASPathIssuer != (u.Path == "/tenant1") {
				t.Fatalf("issuer %s", s.Issuer)
			}
			for _, p := range tc.probes(u.Scheme + "://" + u.Host) {
				resp, _ := h.get(p.path)
				if (resp.StatusCode == http.StatusOK) != p.ok {
					t.Errorf("GET %s: %d, want ok=%v", p.path, resp.StatusCode, p.ok)
					continue
				}
				if p.ok {
					md := h.getJSON(p.path)
					if md["issuer"] != s.Issuer || md["authorization_endpoint"] != s.Issuer+"/authorize" {
						t.Errorf("metadata at %s: %v", p.path, md)
					}
				}
			}
			if c := s.Counts(); c.ASMetaGet != 2 {
				t.Errorf("counts %+v", c)
			}
			// The endpoints live under the issuer's path.
			h.clientID = "x"
			if resp, _ := h.get(h.authorizeURL("", nil)); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("authorize under %s: %d", s.Issuer, resp.StatusCode)
			}
		})
	}
}

func TestNoIss(t *testing.T) {
	s := Start(t, Options{DCR: true, NoIss: true})
	h := newHand(t, s)
	if md := h.getJSON(s.Issuer + "/.well-known/oauth-authorization-server"); md["authorization_response_iss_parameter_supported"] != nil {
		t.Errorf("metadata %v", md)
	}
	h.register(nil)
	if got := h.authorize("", nil); got.Has("iss") || got.Get("code") == "" {
		t.Errorf("callback %v", got)
	}
}

func TestRequestsLogHasNoQuery(t *testing.T) {
	s := Start(t, Options{DCR: true})
	h := newHand(t, s)
	h.register(nil)
	h.login("")
	for _, r := range s.Requests() {
		if strings.ContainsAny(r, "?=") {
			t.Errorf("request log line %q carries a query", r)
		}
	}
	if got := strings.Join(s.Requests(), "|"); !strings.Contains(got, "AS POST /register|AS GET /authorize|AS POST /token") {
		t.Errorf("requests %s", got)
	}
	if len(s.Secrets()) < 3 {
		t.Errorf("secrets %d: want the code, access and refresh tokens", len(s.Secrets()))
	}
}

func TestStatelessMCP(t *testing.T) {
	s := Start(t, Options{DCR: true, Stateless: true, MCPPath: "/v1/mcp", MetadataAtPath: true})
	h := newHand(t, s)
	if !strings.HasSuffix(s.ResourceMetadataURL, "/.well-known/oauth-protected-resource/v1/mcp") {
		t.Fatalf("metadata URL %s", s.ResourceMetadataURL)
	}
	h.register(nil)
	at := h.login("")["access_token"].(string)
	resp, body := h.call(at, "", "echo", `{"text":"x"}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") != "" || !strings.Contains(string(body), `\"text\":\"x\"`) {
		t.Fatalf("stateless echo: %d %q %s", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
	}
	noErrors(t, s)
}
