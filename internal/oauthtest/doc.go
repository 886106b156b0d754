// Package oauthtest is a test fixture: a local OAuth authorization server and an
// MCP server it protects, both on 127.0.0.1 (two ports, two origins), strict
// enough that a client which passes against it follows the MCP authorization
// spec. Start one per test; Errors lists every protocol violation it saw, Counts
// what it served. The fake browser that follows its authorize redirects is the
// main package oauthtest/fakebrowser.
//
// The API is the one /work/notes/oauth-contract.md fixed between this fixture
// and the OAuth client; what this package adds to it is marked "Additions".
//
// # Where the fixture goes beyond, or reads, the contract
//
//   - The authorization response carries iss=<issuer> besides code and state, and
//     the metadata says authorization_response_iss_parameter_supported: true (RFC
//     9207 §2; MCP 2026-07-28 "Authorization Response Validation": servers SHOULD
//     send it, clients MUST check a present one). Options.NoIss turns both off.
//   - DCR without application_type is recorded in Errors (MCP 2026-07-28 "Client
//     Registration", "Application Type and Redirect URI Constraints": clients MUST
//     send it; "native" for loopback redirect URIs), and "web" with loopback
//     redirect URIs is refused as an OIDC server would.
//   - DCR without token_endpoint_auth_method registers a confidential
//     client_secret_basic client with a secret, as RFC 7591 §2 says the default
//     is; a public client registers "none".
//   - A refresh without RotateRefresh answers without a refresh_token (the client
//     keeps its own). Note that 2025-11-25 "Token Theft" says an authorization
//     server MUST rotate refresh tokens of public clients: RotateRefresh=false
//     models a server outside the spec (or a confidential client).
//   - The 403 insufficient_scope challenge names every scope the call needs: the
//     base scopes (ChallengeScope) and StepUpScope, so a client that requests
//     exactly the challenged set (2025-11-25) and one that unions it with what it
//     had (2026-07-28) both end with a token that works.
//   - StepUpScope is not in scopes_supported (else a client without a challenge
//     scope asks for it up front and the step-up is never exercised); the server
//     grants it when asked.
//   - With ASPathIssuer (issuer <origin>/tenant1) only the OIDC path-appending
//     metadata URL answers unless Options.ASMetadata says otherwise, so a client
//     has to walk the whole priority order of the spec.
//
// # Checks, and the spec text each follows
//
// Protected resource (MCP server):
//   - RFC 9728 metadata at the root form /.well-known/oauth-protected-resource, or
//     with Options.MetadataAtPath at the path form
//     /.well-known/oauth-protected-resource/<mcp path> (only one of them answers,
//     so the client's fallback order is exercised): MCP 2025-11-25 "Protected
//     Resource Metadata Discovery Requirements", RFC 9728 §3. "resource" is the
//     MCP URL, authorization_servers the issuer.
//   - 401 without a token: `WWW-Authenticate: Bearer resource_metadata="...",
//     scope="..."` exactly as the spec's example (each part only when
//     MetadataInHeader / ChallengeScope); with a dead token `, error="invalid_token"`
//     is added (RFC 6750 §3.1). MCP "Token Handling": invalid or expired tokens
//     MUST get 401.
//   - The token must be one the authorization server issued, unrevoked, unexpired,
//     issued for resource == the MCP URL (audience, RFC 8707 §2, MCP "Access Token
//     Privilege Restriction") and carry ChallengeScope's scopes; a tools/call of
//     StepUpTool also needs StepUpScope, else `403` with `WWW-Authenticate: Bearer
//     error="insufficient_scope", scope="...", resource_metadata="..."` (MCP
//     "Runtime Insufficient Scope Errors", RFC 6750 §3.1). A token in the query
//     string is a violation (MCP "Token Requirements"). A token the server never
//     issued gets 401 and is counted (Counts.UnknownTokens), not a violation: a
//     user's --header may carry one. Options.StaticTokens are accepted as such
//     headers would be, with every scope, untouched by Revoke and
//     ExpireAccessTokens.
//
// Authorization server:
//   - Metadata (RFC 8414 §2; OIDC Discovery when served there): issuer,
//     endpoints, code_challenge_methods_supported ["S256"] (MCP "Authorization Code
//     Protection": clients MUST refuse without it), registration_endpoint with
//     Options.DCR, client_id_metadata_document_supported with Options.CIMD. URL
//     forms: MCP "Authorization Server Metadata Discovery" (RFC 8414 §3.1 path
//     insertion, OIDC path insertion, OIDC path appending).
//   - Authorize (auto-consent): client_id known, redirect_uri present once and
//     exactly equal to a registered one (MCP "Open Redirection"; stricter than
//     OAuth 2.1 §8.4.2's any-port loopback rule on purpose) — failures here are a
//     400 page, never a redirect (OAuth 2.1 §4.1.2.1); then response_type=code,
//     code_challenge_method=S256 and a 43-character challenge (RFC 7636 §4.2-4.3,
//     MCP: S256 MUST), state present (the fixture requires what the spec says
//     clients SHOULD send), exactly one resource equal to the canonical MCP URL
//     (RFC 8707 §2, MCP "Resource Parameter Implementation"; uppercase scheme/host
//     accepted), known scopes; those failures redirect with error= (and are
//     violations). No parameter twice (OAuth 2.1 §3.1).
//   - Token: form body; client authentication by the registered method
//     (client_secret_basic with form-encoded credentials per RFC 6749 §2.3.1,
//     client_secret_post, or none for public clients); resource exactly once and
//     canonical on every grant, refresh included (MCP: MUST be in token
//     requests); authorization_code: code known, unexpired, unused (a replay
//     revokes its grant, OAuth 2.1 §4.1.3), same client, redirect_uri equal if
//     sent, code_verifier well formed and S256(verifier) == challenge (RFC 7636
//     §4.6); refresh_token: known, same client, grant not revoked, not replaced by
//     rotation (reuse is a violation; with ReuseRevokesGrant it also revokes the
//     grant), scope no wider than the grant's. Refused requests answer the RFC
//     6749 §5.2 JSON error.
//   - DCR (RFC 7591 §2-3): JSON body, redirect_uris https or loopback http (MCP
//     "Communication Security"), supported auth method, grant and response types;
//     201 with client_id (and client_secret unless "none").
//   - CIMD (draft-ietf-oauth-client-id-metadata-document; MCP "Client ID Metadata
//     Documents", "For Authorization Servers"): a URL client_id (https, or http on
//     loopback in tests; a path; no fragment, credentials or dot segments) is
//     fetched without following redirects; the document must be a JSON object
//     whose client_id equals the URL exactly, with client_name and redirect_uris,
//     no client_secret and no auth method but none; Cache-Control max-age is
//     honoured, otherwise every authorization fetches it again.
//
// Pre-registered clients (Options.PreRegistered) get the redirect URIs
// Options.PreRegisteredRedirectURIs names; without any, the first loopback one a
// client presents is pinned (trust on first use) and any other is refused. The spec requires HTTPS for
// authorization server endpoints; the fixture is plain http on loopback.
package oauthtest
