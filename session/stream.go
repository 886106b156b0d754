package session

import (
	"errors"

	"github.com/bir-dev/bir-proxy/upstream"
)

// SetStream passes the relay's handler of long messages on to each server, once it
// is up (upstream.Streamer): a server's messages before and during its re-handshake
// are read whole, for revival reads them itself.
func (c *Conn) SetStream(threshold int, h upstream.StreamHandler) {
	c.streamAt, c.streamH = threshold, h
}

// streamTo gives g c's handler, the first time its messages reach the relay.
func (g *gen) streamTo(c *Conn) {
	if g.streaming || c.streamH == nil {
		return
	}
	g.streaming = true
	if s := g.caps.Streamer; s != nil {
		s.SetStream(c.streamAt, &genStream{c: c, g: g})
	}
}

// genStream is the handler one server's reader asks: what read would look at in a
// whole message is asked here of the head, and read's bookkeeping is done at the end.
type genStream struct {
	c *Conn
	g *gen
}

func (s *genStream) StartStream(id, method []byte) upstream.StreamSink {
	// An answer revival or the session's set-up waits for is read whole: takeOwn
	// and Setup.FromServer read it.
	if s.c.own.waiting() || s.c.setup.Awaiting() || s.c.setup.Listens().Watching() {
		return nil
	}
	sink := s.c.streamH.StartStream(id, method)
	if sink == nil {
		return nil
	}
	return &genSink{s: s, sink: sink}
}

type genSink struct {
	s    *genStream
	sink upstream.StreamSink
}

func (k *genSink) Write(p []byte) { k.sink.Write(p) }

func (k *genSink) End(e upstream.StreamEnd) {
	if e.OK {
		g := k.s.g
		if !g.answered {
			g.answered = true
			if g.announce {
				k.s.c.announce(g)
			}
		}
		if e.Answer && e.ID != nil && k.s.c.setup.Listens().Open() {
			k.s.c.setup.Listens().Closed(e.ID) // a stream the server ended
		}
		if !g.served && e.Answer && e.ID != nil {
			g.served = true
			g.servedAny.Store(true)
		}
		g.passed = true
	}
	k.sink.End(e)
}

// errNoLines is BeginLine's word that the message is to be written whole.
var errNoLines = errors.New("no server takes a message in pieces now")

// BeginLine starts a long message written in pieces to the server serving now
// (upstream.LineWriter). It fails while none is (one is being replaced: a message
// is then held whole for the next). A server that dies in the middle of it fails
// the rest: its reader settles the request as lost, as for any request that server
// had, and nothing of it reaches the next server.
func (c *Conn) BeginLine() (upstream.LinePart, error) {
	g := c.serving.Load()
	if g == nil {
		return nil, errNoLines
	}
	lw := g.caps.LineWriter
	if lw == nil {
		return nil, errNoLines
	}
	if !g.wrote.Load() {
		g.wrote.Store(true)
	}
	return lw.BeginLine()
}
