package oauth

// Secrets returns the secrets the client holds now: the access and refresh tokens of
// the grant as last read or written, its client's secret and the --client-secret.
// The connection that uses the client (upstream.SecretHolder) scrubs them from every
// text it passes on, so a server that quotes one back in an error body does not put
// it in the host's error or the journal; they change with each refresh, so they are
// asked for at each use, not once.
func (c *Client) Secrets() []string {
	c.mu.Lock()
	e := c.entry
	c.mu.Unlock()
	out := make([]string, 0, 4)
	if c.o.ClientSecret != "" {
		out = append(out, c.o.ClientSecret)
	}
	if e == nil {
		return out
	}
	if t := e.Token; t != nil {
		out = append(out, t.AccessToken, t.RefreshToken)
	}
	if cl := e.Client; cl != nil && cl.Secret != "" {
		out = append(out, cl.Secret)
	}
	return out
}
