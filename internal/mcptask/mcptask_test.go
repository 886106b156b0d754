package mcptask

import (
	"testing"
	"time"
)

// TestPollIntervalClamped: a server's 0 must not make a follower spin, nor its 1e400
// stop following; a non-number leaves the interval as it was.
func TestPollIntervalClamped(t *testing.T) {
	for raw, want := range map[string]time.Duration{"0": MinPoll, "-7": MinPoll, "250": 250 * time.Millisecond,
		"1e12": MaxPoll, "1e400": MaxPoll} {
		if got, ok := PollInterval([]byte(raw)); !ok || got != want {
			t.Errorf("PollInterval(%s) = %v %v, want %v", raw, got, ok, want)
		}
	}
	for _, raw := range []string{"", `"5000"`, "null", "1x"} {
		if _, ok := PollInterval([]byte(raw)); ok {
			t.Errorf("PollInterval(%q) read as a number", raw)
		}
	}
}

// TestHandleBothEras: each era's handle, a result that merely has a "task" member,
// and a terminal tasks/get of the extension carrying its result.
func TestHandleBothEras(t *testing.T) {
	tk, ok, bad := Handle([]byte(`{"resultType":"task","taskId":"a","status":"working","pollIntervalMs":200}`))
	if !ok || bad != "" || tk.Era != Ext || string(tk.ID) != `"a"` || tk.Poll != 200*time.Millisecond {
		t.Fatalf("extension handle: %+v %v %q", tk, ok, bad)
	}
	if bad := tk.Read([]byte(`{"resultType":"complete","taskId":"a","status":"completed","result":{"content":[]}}`), true); bad != "" || string(tk.Result) != `{"content":[]}` {
		t.Errorf("terminal tasks/get: %q %s", bad, tk.Result)
	}
	if bad := tk.Read([]byte(`{"taskId":"b","status":"completed","result":{}}`), true); bad == "" {
		t.Error("an answer about another task was taken")
	}
	tk, ok, bad = Handle([]byte(`{"task":{"taskId":"u","status":"working","pollInterval":1e9}}`))
	if !ok || bad != "" || tk.Era != Util || tk.Poll != MaxPoll {
		t.Fatalf("utility handle: %+v %v %q", tk, ok, bad)
	}
	if _, ok, _ := Handle([]byte(`{"content":[],"task":{"taskId":"u"}}`)); ok {
		t.Error("a tool result with a task member taken for a handle")
	}
}

func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"resultType":"task","taskId":"a","pollIntervalMs":1e400}`), []byte(`{"status":"completed","result":{}}`))
	f.Add([]byte(`{"task":{"taskId":"a","status":"working"}}`), []byte(`{"taskId":"a","status":"failed","error":{}}`))
	f.Fuzz(func(t *testing.T, handle, get []byte) {
		tk, ok, bad := Handle(handle)
		if !ok || bad != "" {
			return
		}
		if tk.Poll < MinPoll || tk.Poll > MaxPoll || len(tk.ID) < 2 || tk.ID[0] != '"' {
			t.Fatalf("handle %q read as %+v", handle, tk)
		}
		if tk.Read(get, true) == "" && (tk.Poll < MinPoll || tk.Poll > MaxPoll) {
			t.Fatalf("tasks/get %q read as %+v", get, tk)
		}
	})
}
