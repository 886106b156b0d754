package verify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/mcptask"
)

// A call the server answers with a task handle (2026-07-28: resultType "task";
// 2025-11-25: {"task":{...}}) has its final answer later: the proxy records that
// one (docs/recording.md), so verify follows the task itself, as a replay dispatch
// does (package replay; the reading of handles and states is package mcptask's):
// tasks/get at the task's interval (clamped to 100 ms – 5 s), then, 2025-11-25,
// tasks/result, all within the call's --timeout. Comparing the handle with the
// recorded final result was a "changed" of every task call.

// errTaskExpired is a task that did not end within the call's timeout: it was
// cancelled (tasks/cancel).
type errTaskExpired struct{ why string }

func (e *errTaskExpired) Error() string { return e.why }

// follow follows t until it ends, ctx is done or deadline passes, and returns the
// task's final answer: its result or its JSON-RPC error, as a tools/call would have.
func (r *runner) follow(ctx context.Context, deadline time.Time, t *mcptask.Task) (answer, error) {
	params := append(append([]byte(`{"taskId":`), t.ID...), '}')
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	tick := time.NewTimer(t.Poll)
	defer tick.Stop()
	expired := func() (answer, error) {
		r.cancelTask(ctx, params)
		return answer{}, &errTaskExpired{fmt.Sprintf("the task %s did not end within %s (last status %s); tasks/cancel was sent",
			clipID(t.ID), r.cfg.CallTimeout, strconv.Quote(clipStr(t.Status, 64)))}
	}
	// ask sends a task request within what is left of the call's time.
	ask := func(method string) (answer, error) {
		left := time.Until(deadline)
		if left <= 0 {
			return answer{}, errExpired
		}
		return r.s.request(ctx, left, method, params)
	}
	for polled := false; !polled || !mcptask.Terminal(t.Status); polled = true {
		// input_required is waited out like working: verify is no host and answers
		// no question, so only the timeout ends such a task.
		tick.Reset(t.Poll)
		select {
		case <-ctx.Done():
			r.cancelTask(ctx, params)
			return answer{}, ctx.Err()
		case <-expire.C:
			return expired()
		case <-tick.C:
		}
		a, err := ask("tasks/get")
		switch {
		case errors.Is(err, errExpired):
			return expired()
		case err != nil:
			if ctx.Err() != nil {
				r.cancelTask(ctx, params)
			}
			return answer{}, err
		case a.err != nil:
			// The server no longer knows the task, or refuses to say: its error is
			// the call's answer (and the task, if it runs, is cancelled).
			r.cancelTask(ctx, params)
			return answer{err: a.err}, nil
		}
		if bad := t.Read(a.result, true); bad != "" {
			r.cancelTask(ctx, params)
			return answer{}, &errLost{"the server's answer to tasks/get of task " + clipID(t.ID) + " " + bad}
		}
	}
	switch {
	case t.Status == mcptask.Cancelled:
		return answer{}, &errLost{"the server cancelled the task " + clipID(t.ID)}
	case t.Era == mcptask.Ext && t.Status == mcptask.Failed:
		return answer{err: t.Err}, nil
	case t.Status == mcptask.Failed:
		// 2025-11-25: the proxy records a failure seen in tasks/get as the error
		// its statusMessage makes (docs/recording.md), not tasks/result's answer,
		// which a host need not ask for; so does verify, or every replay of a
		// failed task would read as changed.
		return answer{err: mcptask.FailedError(t.Message)}, nil
	case t.Era == mcptask.Ext:
		return answer{result: t.Result}, nil
	}
	// 2025-11-25: the result is fetched, now that the task has ended.
	a, err := ask("tasks/result")
	if errors.Is(err, errExpired) {
		return expired()
	}
	if err == nil {
		if _, again, _ := mcptask.Handle(a.result); again && a.err == nil {
			return answer{}, &errLost{"the server answered tasks/result of task " + clipID(t.ID) + " with a task handle again"}
		}
	}
	return a, err
}

// taskCancelWait bounds the wait for the answer to a tasks/cancel, as a replay
// dispatch's: its answer is not used, but a cancel written without waiting was lost
// when verify's last call was the task (the connection closed behind it).
const taskCancelWait = 2 * time.Second

// cancelTask tells the server verify gave up on a task, and waits for its answer at
// most taskCancelWait, whatever ctx says (the call's own time is over by then).
func (r *runner) cancelTask(ctx context.Context, params []byte) {
	if r.s.gone() != "" {
		return
	}
	_, _ = r.s.request(context.WithoutCancel(ctx), taskCancelWait, "tasks/cancel", params)
}

func clipID(id []byte) string { return strconv.Quote(clipStr(jsonlex.StringOf(id), 200)) }

func clipStr(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
