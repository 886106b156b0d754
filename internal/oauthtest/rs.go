package oauthtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/tidwall/gjson"
)

// The protected resource: RFC 9728 metadata and the MCP endpoint behind a bearer
// token check.

func newMCPServer(s *Server) *server.StreamableHTTPServer {
	ms := server.NewMCPServer("oauthtest", "0.1.0", server.WithToolCapabilities(false))
	ms.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns its arguments, as JSON text"),
		mcp.WithString("text", mcp.Description("Anything; every argument is echoed")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(req.GetRawArguments())
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(string(b)), nil
	})
	if s.opt.StepUpTool != "" {
		ms.AddTool(mcp.NewTool(s.opt.StepUpTool,
			mcp.WithDescription("Needs the step-up scope "+s.opt.StepUpScope),
		), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("stepped up"), nil
		})
	}
	return server.NewStreamableHTTPServer(ms,
		server.WithEndpointPath(s.opt.MCPPath),
		server.WithStateLess(s.opt.Stateless),
	)
}

// serveMCPHost routes the MCP server's origin: the protected resource metadata and
// the MCP endpoint.
func (s *Server) serveMCPHost(w http.ResponseWriter, r *http.Request) {
	s.logRequest("MCP", r)
	switch {
	case r.URL.Path == s.opt.MCPPath:
		s.serveMCP(w, r)
	case s.mcpBaseURL()+r.URL.Path == s.ResourceMetadataURL:
		s.servePRM(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) mcpBaseURL() string { return strings.TrimSuffix(s.MCPURL, s.opt.MCPPath) }

// servePRM is RFC 9728 §3.2; "resource" is the MCP URL whichever form it is served
// at (RFC 9728 §3.3 for the path form, the MCP spec's root-form extension for the
// other).
func (s *Server) servePRM(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	s.counts.ResourceMetaGet++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.MCPURL,
		"authorization_servers":    []string{s.Issuer},
		"scopes_supported":         s.opt.ScopesSupported,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "oauthtest MCP server",
	})
}

// serveMCP checks the bearer token (OAuth 2.1 §5.2, RFC 6750 §2.1/§3, MCP "Token
// Handling", "Access Token Privilege Restriction") and hands the request to
// mcp-go.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("access_token") {
		// MCP "Token Requirements": access tokens MUST NOT be in the query string.
		s.violation("mcp: access_token in the URL query string")
	}
	base := splitScope(s.opt.ChallengeScope)
	authz := r.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(authz, " ")
	if authz == "" {
		s.unauthorized(w, "")
		return
	}
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		s.violation("mcp: Authorization header is not a Bearer token (scheme %q)", scheme)
		s.unauthorized(w, "invalid_request")
		return
	}
	tok = strings.TrimSpace(tok)
	s.mu.Lock()
	at := s.access[tok]
	live := at != nil && !at.grant.revoked && s.now().Before(at.expires) && canonicalResource(at.resource) == s.resource
	var granted []string
	if live {
		granted = at.scope
	}
	if at == nil {
		// Made up, meant for another server, or a user's --header: counted, not
		// a violation, since a user-supplied header legitimately wins over OAuth.
		s.counts.UnknownTokens++
	}
	s.mu.Unlock()
	if !live {
		s.unauthorized(w, "invalid_token")
		return
	}

	need := base
	if r.Method == http.MethodPost && s.opt.StepUpTool != "" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if callsTool(body, s.opt.StepUpTool) {
			need = union(need, splitScope(s.opt.StepUpScope))
		}
	}
	if !hasAll(granted, need) {
		s.mu.Lock()
		s.counts.MCPForbidden++
		s.mu.Unlock()
		// MCP "Runtime Insufficient Scope Errors": every scope the operation needs
		// in one challenge, the base scopes included, so a client that asks for
		// exactly the challenged set (2025-11-25) keeps its other permissions.
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q, error_description="this operation needs %s"`,
			strings.Join(need, " "), s.ResourceMetadataURL, strings.Join(need, " ")))
		http.Error(w, "insufficient_scope", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	s.counts.MCPAuthorized++
	s.mu.Unlock()
	s.mcp.ServeHTTP(w, r)
}

// unauthorized answers 401 with the challenge the MCP spec shows (RFC 9728 §5.1,
// RFC 6750 §3: no error code when the request had no credentials).
func (s *Server) unauthorized(w http.ResponseWriter, errCode string) {
	s.mu.Lock()
	s.counts.MCPUnauthorized++
	s.mu.Unlock()
	var params []string
	if s.opt.MetadataInHeader {
		params = append(params, fmt.Sprintf("resource_metadata=%q", s.ResourceMetadataURL))
	}
	if s.opt.ChallengeScope != "" {
		params = append(params, fmt.Sprintf("scope=%q", s.opt.ChallengeScope))
	}
	if errCode != "" {
		params = append(params, fmt.Sprintf("error=%q", errCode))
	}
	v := "Bearer"
	if len(params) > 0 {
		v += " " + strings.Join(params, ", ")
	}
	w.Header().Set("WWW-Authenticate", v)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// callsTool reports whether the JSON-RPC message (or batch) in body calls tool.
func callsTool(body []byte, tool string) bool {
	msg := gjson.ParseBytes(body)
	msgs := []gjson.Result{msg}
	if msg.IsArray() {
		msgs = msg.Array()
	}
	return slices.ContainsFunc(msgs, func(m gjson.Result) bool {
		return m.Get("method").String() == "tools/call" && m.Get("params.name").String() == tool
	})
}
