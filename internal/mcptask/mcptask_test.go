package mcptask

import (
	"bytes"
	"strings"
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
	for _, r := range []string{`{"content":[],"task":{"taskId":"u"}}`, `{"resultType":"complete","task":{"taskId":"u"}}`,
		`{"task":{"taskId":5}}`, `{"task":"u"}`, `{"resultType":"input_required","task":{"taskId":"u"}}`} {
		if _, ok, _ := Handle([]byte(r)); ok {
			t.Errorf("a tool result with a task member taken for a handle: %s", r)
		}
	}
	if _, ok, bad := Handle([]byte(`{"resultType":"task","status":"working"}`)); !ok || bad == "" {
		t.Errorf("an extension handle without a taskId: %v %q", ok, bad)
	}
}

// TestHandleStateRaw: the members as sent, the last of a name winning, each era's
// poll interval under its own name only.
func TestHandleStateRaw(t *testing.T) {
	era, s := HandleState([]byte(`{"resultType":"task","taskId":"a","taskId":"b","status":7,"pollInterval":9,"statusMessage":"m"}`))
	if era != Ext || string(s.ID) != `"b"` || string(s.Status) != "7" || s.Poll != nil || string(s.Message) != `"m"` {
		t.Errorf("extension: %d %+v", era, s)
	}
	era, s = HandleState([]byte(`{"task":{"taskId":"u","pollIntervalMs":1,"pollInterval":2}}`))
	if era != Util || string(s.ID) != `"u"` || s.Status != nil || string(s.Poll) != "2" {
		t.Errorf("utility: %d %+v", era, s)
	}
	if s, ok := ReadState([]byte(`{"status":"failed","error":{"code":1},"result":[]}`), 0); !ok || string(s.Err) != `{"code":1}` || string(s.Result) != "[]" {
		t.Errorf("tasks/get: %v %+v", ok, s)
	}
	if _, ok := ReadState([]byte(`{"status":`), 0); ok {
		t.Error("a broken object read")
	}
}

// TestKeptStringsAreBounded: a follower of many tasks keeps no task id over MaxID
// bytes, no status over MaxStatus, and nothing that is not a JSON string.
func TestKeptStringsAreBounded(t *testing.T) {
	id := strings.Repeat("i", MaxID)
	if got := IDString([]byte(`"` + id + `"`)); got != id {
		t.Errorf("a task id of MaxID bytes: %d bytes", len(got))
	}
	if got := IDString([]byte(`"` + id + `i"`)); got != "" {
		t.Errorf("a task id past MaxID kept: %d bytes", len(got))
	}
	st := strings.Repeat("w", MaxStatus)
	if got := StatusString([]byte(`"` + st + `"`)); got != st {
		t.Errorf("a status of MaxStatus bytes: %d bytes", len(got))
	}
	if got := StatusString([]byte(`"` + st + `w"`)); got != "" {
		t.Errorf("a status past MaxStatus kept: %d bytes", len(got))
	}
	for _, raw := range []string{"", "5", "null", `"a`, `"a"b"`, "\"a\x01\""} {
		if IDString([]byte(raw)) != "" || StatusString([]byte(raw)) != "" {
			t.Errorf("%q read as a string", raw)
		}
	}
	if got := IDString([]byte(`"t\u00e9"`)); got != "t\u00e9" {
		t.Errorf("an escaped id: %q", got)
	}
}

// FuzzHandle: whatever a server answers, a handle read has a usable taskId and a
// clamped interval, Handle and HandleState agree, and a follower of many tasks keeps
// nothing past the bounds.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"resultType":"task","taskId":"a","pollIntervalMs":1e400}`), []byte(`{"status":"completed","result":{}}`))
	f.Add([]byte(`{"task":{"taskId":"a","status":"working"}}`), []byte(`{"taskId":"a","status":"failed","error":{}}`))
	f.Add([]byte(`{"content":[],"task":{"taskId":"a"}}`), []byte(`{"taskId":"a\u0000","status":"input_required","statusMessage":1}`))
	f.Fuzz(func(t *testing.T, handle, get []byte) {
		for _, b := range [][]byte{handle, get} {
			if s, ok := ReadState(b, Ext); ok {
				if len(IDString(s.ID)) > MaxID || len(StatusString(s.Status)) > MaxStatus {
					t.Fatalf("%q kept past the bounds", b)
				}
			}
		}
		era, s := HandleState(handle)
		tk, ok, bad := Handle(handle)
		if ok != (era != 0) || ok && tk.Era != era {
			t.Fatalf("handle %q: HandleState era %d, Handle %v era %d", handle, era, ok, tk.Era)
		}
		if ok && bad == "" && !bytes.Equal(tk.ID, s.ID) {
			t.Fatalf("handle %q: ID %q, state %q", handle, tk.ID, s.ID)
		}
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
