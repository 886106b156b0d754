package intercept

import (
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/report"
)

var _ relay.TimeoutInterceptor = (*Interceptor)(nil)

// CallTimedOut queues the answer the relay gave the host for a call whose deadline
// passed (--call-timeout): the call ends as a timeout, with that error.
func (ic *Interceptor) CallTimedOut(answer []byte, at time.Time) {
	if ic.q == nil || ic.interested.Load() == 0 {
		return
	}
	ic.q.push(event{kind: evUpstream, msg: answer, at: at, timedOut: true}, true)
}

// timedOut ends the host's call the answer m (the relay's, at the call's deadline)
// is for, as a timeout.
func (t *tracker) timedOut(m []byte, at time.Time) {
	f, ok := jsonlex.TopFields(m)
	if !ok || f.ID == nil {
		return
	}
	k := t.idKey("", f.ID)
	if c, ok := t.calls[string(k)]; ok {
		delete(t.calls, c.key)
		t.finish(c, at, report.OutcomeTimeout, nil, f.Error)
	}
}
