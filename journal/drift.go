package journal

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// RecordDrift is the "record" member of a Drift line.
const RecordDrift = "tool_drift"

// Drift is the journal's record of a tool whose definition drifted from its pin
// (package pins: said once a session per tool, as on stderr), one line:
//
//	{"ack":null,"record":"tool_drift","proxyId":"6f1c...","server":"github",
//	 "at":"2026-12-06T10:40:00.123Z",
//	 "drift":{"tool":"create_issue","status":"changed","changed":["description"]}}
//
// It is not a call, and is shaped so that readers of reports skip it, those of
// versions before it included: "ack" is the member a line that is not a report has
// always carried (older `log` and `log --stats` skip every line with one), and no
// "tool" at the top (older `verify` skips a line without one, saying so). The tool is
// in "drift", with its status (pins: changed, new or renamed), the top-level members
// that changed (changed) and the name it had (renamed: from).
type Drift struct {
	Ack     *struct{} `json:"ack"` // always null: not a report (above)
	Record  string    `json:"record"`
	ProxyID string    `json:"proxyId"`
	Server  string    `json:"server"`
	At      time.Time `json:"at"`
	Drift   DriftOf   `json:"drift"`
}

// DriftOf is what drifted: a Drift's "drift" member.
type DriftOf struct {
	Tool    string   `json:"tool"`
	Status  string   `json:"status"`
	Changed []string `json:"changed,omitempty"`
	From    string   `json:"from,omitempty"`
}

// maxName bounds a tool name (and each changed member's) a drift record repeats.
const maxName = 1024

// MaxDriftLine bounds a drift record's line: names are cut to maxName (escaped, 6
// times that at most), and at most 17 changed members are named.
const MaxDriftLine = 128 << 10

// AppendJSON appends the record as one JSON line, without its newline; "record" is
// set to RecordDrift, the time written in UTC and the names cut to 1 KiB.
func (d Drift) AppendJSON(buf []byte) []byte {
	d.Ack, d.Record, d.At = nil, RecordDrift, d.At.UTC()
	d.Server, d.Drift.Tool, d.Drift.From = clip(d.Server), clip(d.Drift.Tool), clip(d.Drift.From)
	if len(d.Drift.Changed) > 17 {
		d.Drift.Changed = append(d.Drift.Changed[:16:16], "(other members)")
	}
	changed := make([]string, len(d.Drift.Changed))
	for i, c := range d.Drift.Changed {
		changed[i] = clip(c)
	}
	d.Drift.Changed = changed
	b, err := json.Marshal(d)
	if err != nil {
		return buf // strings and a time: it cannot fail
	}
	return append(buf, b...)
}

// clip cuts s to maxName bytes, at a character's start.
func clip(s string) string {
	if len(s) <= maxName {
		return s
	}
	cut := maxName
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Drift decodes a drift record (KindDrift).
func (r Record) Drift() (Drift, error) {
	var d Drift
	err := json.Unmarshal(r.Line, &d)
	return d, err
}

// kindOf says what a line with an "ack" member that is not a number is.
func kindOf(line []byte) Kind {
	if gjson.GetBytes(line, "record").String() == RecordDrift {
		return KindDrift
	}
	return KindOther
}
