package intercept

import (
	"bytes"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/relay"
)

// CorrelationKey is the argument FromHost removes from each tools/call
// (relay.KeyedInterceptor): the relay removes it itself from a long call it streams
// to the server.
func (ic *Interceptor) CorrelationKey() string { return ic.key }

// StreamsArgs says a long call may be given without its arguments
// (relay.StreamingInterceptor): not when a cassette records them.
func (ic *Interceptor) StreamsArgs() bool {
	return ic.tracker == nil || ic.tracker.cassette == nil
}

// FromHostStreamed is FromHost of a long call the relay streamed to the server
// (relay.StreamingInterceptor): standIn is the call with its arguments reduced to
// the correlation member, args what the arguments were reduced to as they passed.
// The report takes its fingerprint and arguments from args, waiting for them on
// bookkeeping's goroutine; the host's path only queues.
func (ic *Interceptor) FromHostStreamed(standIn []byte, args relay.StreamedArgs, readAt time.Time) {
	if ic.q == nil {
		return
	}
	ic.lx.Lex(standIn)
	out, sc := stripLexed(standIn, ic.key, &ic.lx, true)
	if sc.want&wantCall == 0 {
		return // not a call after all: nothing to report
	}
	ic.interested.Add(sc.awaiting)
	ic.tracker.streamed.push(args)
	ev := event{kind: evHost, msg: out, scan: sc, at: readAt, streamed: true}
	if len(ic.lx.Objs) == 1 && len(ic.lx.RPC()) == 1 && !ic.lx.Objs[0].Recheck {
		ev.top = spansOf(&ic.lx.Objs[0])
	}
	ic.q.push(ev, sc.ends)
	// Looked at now, as a request read whole over 64 KiB is (its stand-in is small):
	// until bookkeeping has taken its report's parts, the digest holds its buffers,
	// some MB a call, for as long as the tool runs.
	ic.q.signal()
	ic.sentPending = true
}

// streamedQueue hands what FromHostStreamed was given to bookkeeping, in the order
// of the events that say so.
type streamedQueue struct {
	mu sync.Mutex
	q  []relay.StreamedArgs
}

func (s *streamedQueue) push(a relay.StreamedArgs) {
	s.mu.Lock()
	s.q = append(s.q, a)
	s.mu.Unlock()
}

func (s *streamedQueue) pop() relay.StreamedArgs {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return nil
	}
	a := s.q[0]
	s.q[0] = nil
	s.q = s.q[1:]
	return a
}

// describeStreamed is describeArgs of a call whose arguments streamed past.
func (sc *scratch) describeStreamed(c *call, args relay.StreamedArgs, capBytes int) {
	c.fingerprint = args.Fingerprint()
	out, clipped := args.Report(max((capBytes-fixedSize(c))/2, minPart))
	c.argsOut, c.argsClipped = bytes.Clone(out), clipped
	c.callIDOut = clipID(c.callID)
	c.msg, c.args = nil, nil
}
