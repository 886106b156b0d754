// Package report is the step report (SPEC §5) and the interface that takes it: what
// intercept builds and recorder delivers. It is a leaf on purpose: intercept sits on
// the proxy's hot path and needs only these types, not the HTTP delivery stack that
// package recorder brings with it.
package report

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

// Step is one step report: one tools/call, from the host's line being read to its end.
// Field names and null-ness are the recorder's contract (SPEC §5), so every pointer
// field without omitempty is deliberately sent as null rather than left out.
type Step struct {
	ProxyID string `json:"proxyId"`
	Server  string `json:"server"`
	// Seq is assigned by the sink when the report is submitted, so it counts submitted
	// reports of one proxyId from 1 with no gaps whatever the order calls ended in.
	Seq uint64 `json:"seq"`

	CallID *string `json:"callId"`
	Tool   string  `json:"tool"`

	Args            json.RawMessage `json:"args"`
	ArgsFingerprint string          `json:"argsFingerprint"`
	ArgsClipped     bool            `json:"argsClipped"`

	ReceivedAt time.Time `json:"receivedAt"`
	StartedAt  time.Time `json:"startedAt"`
	EndedAt    time.Time `json:"endedAt"`
	DurationMs float64   `json:"durationMs"`

	Outcome       string          `json:"outcome"`
	Result        json.RawMessage `json:"result,omitempty"`
	ResultClipped bool            `json:"resultClipped"`
	Error         json.RawMessage `json:"error,omitempty"`
	// ResultBytes is the length in bytes of the answer's "result" value (or, for an
	// rpc_error, of its "error" value) as the server sent it, before redaction or any
	// clip: what the call cost the host's context, which Result, cut to fit the
	// report, does not show. 0 (left out) when no answer of the server's ended the call.
	ResultBytes int64 `json:"resultBytes,omitempty"`

	DispatchID *string `json:"dispatchId"`

	// A call that outlived its first answer (SPEC §3.5): Rounds counts the rounds of a
	// multi round-trip call (set when there were two or more), TaskID names the task a
	// call became and TaskStatus is the last status seen of it.
	Rounds     int    `json:"rounds,omitempty"`
	TaskID     string `json:"taskId,omitempty"`
	TaskStatus string `json:"taskStatus,omitempty"`

	// Trimmed says the host got the result cut to the result budget
	// (--max-result-tokens, docs/budget.md); Result is still the server's. Spill is
	// the file that holds the server's whole answer ("" when it could not be kept).
	Trimmed bool   `json:"trimmed,omitempty"`
	Spill   string `json:"spill,omitempty"`

	// RawChecked says Args, Result and Error are each empty or valid JSON with no line
	// break in it, as redact.Report's output always is: AppendJSON then copies them
	// as they are, without checking them again (3% of a recording proxy's CPU). It is
	// not part of the report.
	RawChecked bool `json:"-"`
}

// AppendJSON appends the report as one JSON object on one line, the document
// encoding/json makes of s (with HTML escaping off, and raw fields kept as they are
// unless they span lines), at a fraction of the cost: every report is
// encoded once, on the proxy's busiest goroutine but one, and encoding/json re-validates
// and compacts each raw field through reflection. Raw fields that are not valid JSON are
// replaced by a string saying so, rather than costing the whole report (and a gap in
// seq).
func (s *Step) AppendJSON(b []byte) []byte {
	b = append(b, `{"proxyId":`...)
	b = appendString(b, s.ProxyID)
	b = append(b, `,"server":`...)
	b = appendString(b, s.Server)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, s.Seq, 10)
	b = append(b, `,"callId":`...)
	b = appendOptString(b, s.CallID)
	b = append(b, `,"tool":`...)
	b = appendString(b, s.Tool)
	b = append(b, `,"args":`...)
	b = appendRaw(b, s.Args, true, s.RawChecked)
	b = append(b, `,"argsFingerprint":`...)
	b = appendString(b, s.ArgsFingerprint)
	b = append(b, `,"argsClipped":`...)
	b = strconv.AppendBool(b, s.ArgsClipped)
	b = append(b, `,"receivedAt":`...)
	b = appendTime(b, s.ReceivedAt)
	b = append(b, `,"startedAt":`...)
	b = appendTime(b, s.StartedAt)
	b = append(b, `,"endedAt":`...)
	b = appendTime(b, s.EndedAt)
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendFloat(b, s.DurationMs, 'f', -1, 64)
	b = append(b, `,"outcome":`...)
	b = appendString(b, s.Outcome)
	if len(s.Result) > 0 {
		b = append(b, `,"result":`...)
		b = appendRaw(b, s.Result, false, s.RawChecked)
	}
	b = append(b, `,"resultClipped":`...)
	b = strconv.AppendBool(b, s.ResultClipped)
	if len(s.Error) > 0 {
		b = append(b, `,"error":`...)
		b = appendRaw(b, s.Error, false, s.RawChecked)
	}
	if s.ResultBytes != 0 {
		b = append(b, `,"resultBytes":`...)
		b = strconv.AppendInt(b, s.ResultBytes, 10)
	}
	b = append(b, `,"dispatchId":`...)
	b = appendOptString(b, s.DispatchID)
	if s.Rounds != 0 {
		b = append(b, `,"rounds":`...)
		b = strconv.AppendInt(b, int64(s.Rounds), 10)
	}
	if s.TaskID != "" {
		b = append(b, `,"taskId":`...)
		b = appendString(b, s.TaskID)
	}
	if s.TaskStatus != "" {
		b = append(b, `,"taskStatus":`...)
		b = appendString(b, s.TaskStatus)
	}
	if s.Trimmed {
		b = append(b, `,"trimmed":true`...)
	}
	if s.Spill != "" {
		b = append(b, `,"spill":`...)
		b = appendString(b, s.Spill)
	}
	return append(b, '}')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendRaw appends raw JSON. A raw newline can only be whitespace between tokens, and
// would cut a journal or spool line in two, so a value holding one is compacted; other
// whitespace is left alone (redact's output has none, and compacting every report cost
// more than encoding the rest of it). nullIfEmpty says what an absent value is; checked
// says raw is known to be valid JSON on one line (Step.RawChecked).
func appendRaw(b, raw []byte, nullIfEmpty, checked bool) []byte {
	if len(raw) == 0 {
		if nullIfEmpty {
			return append(b, "null"...)
		}
		return b
	}
	if checked {
		return append(b, raw...)
	}
	// jsonlex.Valid, not gjson.ValidBytes, which recurses per level: raw came from a
	// peer (a server's result), and deep nesting overflowed the stack.
	if !jsonlex.Valid(raw) {
		return append(b, `"[not valid JSON; omitted]"`...)
	}
	if bytes.IndexByte(raw, '\n') >= 0 || bytes.IndexByte(raw, '\r') >= 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err == nil {
			return append(b, buf.Bytes()...)
		}
	}
	return append(b, raw...)
}

// appendString is the one quoter: the bytes encoding/json writes, HTML escaping off.
func appendString(b []byte, s string) []byte { return jsonlex.AppendString(b, s) }
