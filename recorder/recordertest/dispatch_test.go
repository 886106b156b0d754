package recordertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestDispatchQueueEndsAHeldPoll: a poll being held is answered as soon as a dispatch
// or cancel is queued for its proxy, with everything queued, once.
func TestDispatchQueueEndsAHeldPoll(t *testing.T) {
	s := Start(t)
	tok := s.Token()
	post(t, s, tok, "/proxy/register", reg)
	s.Dispatch("other", Dispatch{DispatchID: "not-mine", Tool: "x"})

	got := make(chan string, 1)
	go func() {
		_, body := post(t, s, tok, "/proxy/poll", `{"proxyId":"p1","server":"github","pid":99,"waitMs":60000}`)
		got <- body
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.Wait(ctx, func(v Snapshot) bool { return v.Polling == 1 }); err != nil {
		t.Fatal(err)
	}
	s.Dispatch("p1",
		Dispatch{DispatchID: "d1", Tool: "echo", Arguments: json.RawMessage(`{"a":1}`), TimeoutMs: 500},
		Dispatch{DispatchID: "d2", Tool: "hang"})
	s.Cancel("p1", "d0")
	var body string
	select {
	case body = <-got:
	case <-ctx.Done():
		t.Fatal("the held poll was not answered when a dispatch was queued")
	}
	// Queued under one lock, so the poll may have woken for the first and taken all,
	// or for the first alone; either way nothing is handed twice.
	ids := gjson.Get(body, "dispatches.#.dispatchId").String()
	if ids != `["d1","d2"]` && ids != `["d1"]` {
		t.Fatalf("poll answered %s", body)
	}
	if gjson.Get(body, "dispatches.0.arguments.a").Int() != 1 || gjson.Get(body, "dispatches.0.timeoutMs").Int() != 500 {
		t.Fatalf("dispatch fields: %s", body)
	}
	if gjson.Get(body, "dispatches.1.timeoutMs").Exists() || gjson.Get(body, "dispatches.1.arguments").Exists() {
		t.Fatalf("unset fields were sent: %s", body)
	}
	_, again := post(t, s, tok, "/proxy/poll", `{"proxyId":"p1","server":"github","pid":99,"waitMs":0}`)
	all := gjson.Get(body, "dispatches.#").Int() + gjson.Get(again, "dispatches.#").Int()
	cancels := gjson.Get(body, "cancel.#").Int() + gjson.Get(again, "cancel.#").Int()
	if all != 2 || cancels != 1 {
		t.Fatalf("handed %d dispatches and %d cancels over two polls, want 2 and 1: %s / %s", all, cancels, body, again)
	}
	post(t, s, tok, "/proxy/result", `{"proxyId":"p1","dispatchId":"d1","outcome":"ok","result":{},"durationMs":1}`)
	if rs := s.Results(); len(rs) != 1 || rs[0].Outcome != "ok" || rs[0].DispatchID != "d1" {
		t.Fatalf("results: %+v", rs)
	}
}

// TestUnreachableCountsConnections: while Unreachable, every connection is cut and
// counted; Up serves again on the same port.
func TestUnreachableCountsConnections(t *testing.T) {
	s := Start(t)
	if err := s.Unreachable(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := tryPost(t.Context(), s.URL(), s.Token(), "/proxy/register", reg); err == nil {
			t.Fatal("a request got an answer while the recorder was unreachable")
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := s.Wait(ctx, func(v Snapshot) bool { return v.Refused == 3 }); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	if st, _ := post(t, s, s.Token(), "/proxy/register", reg); st != 200 {
		t.Fatalf("register after Up: %d", st)
	}
	if n := s.Refused(); n != 3 {
		t.Fatalf("refused %d, want 3", n)
	}
}
