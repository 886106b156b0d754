package oauthtest

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"
)

// TestConcurrentClients: five clients at once through every endpoint, under the
// race detector, and the counts add up.
func TestConcurrentClients(t *testing.T) {
	s := Start(t, Options{DCR: true, RotateRefresh: true, MetadataInHeader: true, ChallengeScope: "mcp:read", TokenDelay: 20 * time.Millisecond})
	const n = 5
	hands := make([]*hand, n)
	for i := range hands {
		hands[i] = newHand(t, s)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 10*n)
	for _, h := range hands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The hand's helpers Fatalf on a broken step; from this goroutine that
			// marks the test failed and ends only this goroutine (wg.Done is
			// deferred), which is all a failure here needs. Plain checks report on errs.
			resp, _ := h.mcpPost("", "", initialize)
			if resp.StatusCode != http.StatusUnauthorized {
				errs <- "no 401 first"
				return
			}
			h.register(nil)
			tok := h.login("mcp:read")
			sid := h.session(tok["access_token"].(string))
			if resp, body := h.call(tok["access_token"].(string), sid, "echo", `{"text":"x"}`); resp.StatusCode != http.StatusOK {
				errs <- "echo: " + string(body)
				return
			}
			if status, body := h.refresh(tok["refresh_token"].(string), nil); status != http.StatusOK {
				errs <- "refresh: " + body["error"].(string)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	noErrors(t, s)
	c := s.Counts()
	want := Counts{Registrations: n, Authorizes: n, CodeExchanges: n, Refreshes: n, MCPUnauthorized: n, MCPAuthorized: 2 * n, ResourceMetaGet: 0}
	if c != want {
		t.Errorf("counts\n got %+v\nwant %+v", c, want)
	}
	if len(s.LastResource()) != 3*n {
		t.Errorf("resources seen %d, want %d", len(s.LastResource()), 3*n)
	}
}

// TestRefreshRace: five refreshes of one rotating refresh token at once, as five
// proxies that do not coordinate would send: exactly one wins, and the fixture
// reports the four losers as violations — what a client test relies on to prove
// its coordination.
func TestRefreshRace(t *testing.T) {
	s := Start(t, Options{DCR: true, RotateRefresh: true, TokenDelay: 20 * time.Millisecond})
	h := newHand(t, s)
	h.register(nil)
	rt := h.login("")["refresh_token"].(string)
	const n = 5
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = h.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "resource": {s.MCPURL}})
		}()
	}
	wg.Wait()
	ok := 0
	for _, st := range statuses {
		if st == http.StatusOK {
			ok++
		}
	}
	if c := s.Counts(); ok != 1 || c.Refreshes != n || c.RefreshRefused != n-1 || len(s.Errors()) != n-1 {
		t.Errorf("statuses %v, counts %+v, violations %q", statuses, c, s.Errors())
	}
}
