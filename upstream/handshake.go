package upstream

import (
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// handshake remembers what the host did to set up a session-era session, so that a
// new session (after the server's session expired, or its event stream was lost) can
// be set up the same way without the host noticing: the host's initialize and
// notifications/initialized, its last log level, its resource subscriptions.
type handshake struct {
	initialize   []byte
	initialized  []byte
	initAnswered bool
	setLevel     []byte
	subscribed   map[string][]byte // resources/subscribe requests by uri
	order        []string          // subscription uris, in the order made
}

// observe notes m if it sets something up. Stateless-era messages set nothing up.
func (h *handshake) observe(m *outMsg) {
	if m.version != "" {
		return
	}
	switch m.method {
	case "initialize":
		*h = handshake{initialize: m.raw}
	case "notifications/initialized":
		h.initialized = m.raw
	case "logging/setLevel":
		h.setLevel = m.raw
	case "resources/subscribe", "resources/unsubscribe":
		uri, ok := jsonlex.DecodeString(jsonlex.Get(m.params, "uri"))
		if !ok {
			return
		}
		if h.subscribed == nil {
			h.subscribed = map[string][]byte{}
		}
		if _, had := h.subscribed[uri]; had {
			delete(h.subscribed, uri)
			for i, u := range h.order {
				if u == uri {
					h.order = append(h.order[:i], h.order[i+1:]...)
					break
				}
			}
		}
		if m.method == "resources/subscribe" {
			h.subscribed[uri] = m.raw
			h.order = append(h.order, uri)
		}
	}
}

// replay returns the messages that set a new session up as the host set this one up,
// requests with ids from newID; none when the host never completed an initialize.
func (h *handshake) replay(newID func() []byte) [][]byte {
	if h.initialize == nil || !h.initAnswered {
		return nil
	}
	out := [][]byte{withID(h.initialize, newID())}
	if h.initialized != nil {
		out = append(out, h.initialized)
	}
	if h.setLevel != nil {
		out = append(out, withID(h.setLevel, newID()))
	}
	for _, uri := range h.order {
		out = append(out, withID(h.subscribed[uri], newID()))
	}
	return out
}
