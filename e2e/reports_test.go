package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

const (
	correlationKey = "_bir_call_id"
	// reportCap is SPEC §3.3's default cap on one report, whatever the call carried.
	reportCap = 64 << 10
)

// reportProblems holds the step reports a proxy produced against the calls the host
// made (SPEC §3, §5): exactly one report per tools/call round, joined by callId, with
// the outcome the host saw, the fingerprint the host computes over the arguments it
// sent, no secret the host put in, and seq counting each proxy run's reports from 1.
// It returns one line per problem.
func reportProblems(server string, calls hostCalls, reports [][]byte, forbidden []string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	byCallID := map[string][][]byte{}
	seqs := map[string][]int64{}
	for _, body := range reports {
		if !gjson.ValidBytes(body) {
			bad("a report is not valid JSON: %s", excerpt(string(body), 0))
			continue
		}
		r := gjson.ParseBytes(body)
		id := r.Get("callId")
		if id.Type != gjson.String {
			bad("report seq %d (%s) has callId %s; the host sent one with every call", r.Get("seq").Int(), r.Get("tool"), id.Raw)
			continue
		}
		byCallID[id.String()] = append(byCallID[id.String()], body)
		seqs[r.Get("proxyId").String()] = append(seqs[r.Get("proxyId").String()], r.Get("seq").Int())
	}
	for id := range byCallID {
		slices.SortFunc(byCallID[id], func(a, b []byte) int {
			return int(gjson.GetBytes(a, "seq").Int() - gjson.GetBytes(b, "seq").Int())
		})
	}
	for proxyID, got := range seqs {
		slices.Sort(got)
		for i, seq := range got {
			if seq != int64(i+1) {
				bad("proxy %s: report seqs are %v, want 1..%d without gaps or repeats", proxyID, got, len(got))
				break
			}
		}
	}
	calls.Calls = joinRounds(calls.Calls)
	if len(reports) != len(calls.Calls) {
		bad("%d step reports for %d tools/call requests the host sent (its retries of a call that asked for input joined)", len(reports), len(calls.Calls))
	}

	used := map[string]int{}
	for _, c := range calls.Calls {
		if c.CallID == nil {
			bad("host call %s (%s) carries no callId; the proxied runs must send one", c.RequestID, c.Tool)
			continue
		}
		id := *c.CallID
		n := used[id]
		used[id]++
		if n >= len(byCallID[id]) {
			bad("no report for the call with callId %q (tool %s, outcome %s)", id, c.Tool, c.Outcome)
			continue
		}
		body := byCallID[id][n]
		r := gjson.ParseBytes(body)
		where := fmt.Sprintf("report for callId %q (tool %s)", id, c.Tool)
		expect := func(field, want string) {
			if got := r.Get(field); got.Type != gjson.String || got.String() != want {
				bad("%s: %s is %s, want %q", where, field, got.Raw, want)
			}
		}
		expect("server", server)
		expect("tool", c.Tool)
		expect("outcome", c.Outcome)
		expect("argsFingerprint", c.ArgsFingerprint)
		if got := r.Get("rounds").Int(); c.Rounds > 1 && got != int64(c.Rounds) || c.Rounds <= 1 && r.Get("rounds").Exists() {
			bad("%s: rounds is %s, want %d (SPEC §3.5: a multi round-trip call is one report)", where, r.Get("rounds").Raw, c.Rounds)
		}
		if d := r.Get("dispatchId"); !d.Exists() || d.Type != gjson.Null {
			bad("%s: dispatchId is %q, want null (a host call is no replay dispatch)", where, d.Raw)
		}
		if r.Get("args").Get(gjson.Escape(correlationKey)).Exists() {
			bad("%s: args still carry the correlation key", where)
		}
		for _, s := range forbidden {
			if s != "" && bytes.Contains(body, []byte(s)) {
				bad("%s carries the secret %q (the report must be redacted)", where, s)
			}
		}
		if len(body) > reportCap {
			bad("%s is %d bytes, over the %d-byte cap", where, len(body), reportCap)
		}
		var at [3]time.Time
		for i, f := range []string{"receivedAt", "startedAt", "endedAt"} {
			t, err := time.Parse(time.RFC3339Nano, r.Get(f).String())
			if err != nil {
				bad("%s: %s %s is not RFC 3339: %v", where, f, r.Get(f).Raw, err)
			}
			at[i] = t
		}
		if at[1].Before(at[0]) || at[2].Before(at[1]) {
			bad("%s: receivedAt %v, startedAt %v, endedAt %v are out of order", where, at[0], at[1], at[2])
		}
		if d := r.Get("durationMs"); d.Type != gjson.Number || d.Float() < 0 {
			bad("%s: durationMs is %s", where, d.Raw)
		}
	}
	return problems
}

// journalReports reads the journal a proxy writes with no recorder configured.
func journalReports(stateDir, server string) ([][]byte, error) {
	path := filepath.Join(stateDir, "bir-proxy", "journal", server+".jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the journal: %w", err)
	}
	var out [][]byte
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line)
		}
	}
	return out, nil
}

// filesUnder lists every entry below dir, for proving BIR_OFF leaves nothing behind.
func filesUnder(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			out = append(out, strings.TrimPrefix(p, dir+string(filepath.Separator)))
		}
		return nil
	})
	return out
}

// joinRounds makes the host's calls the calls a report is owed for (SPEC §3.5): a
// call answered input_required and retried — the same tool, callId and arguments —
// is one call with the outcome of its last round and the number of rounds.
func joinRounds(calls []expectedCall) []expectedCall {
	type key struct{ tool, callID, fp string }
	awaiting := map[key]int{} // → index in out of a call whose last round asked for input
	var out []expectedCall
	for _, c := range calls {
		k := key{c.Tool, "", c.ArgsFingerprint}
		if c.CallID != nil {
			k.callID = *c.CallID
		}
		if i, ok := awaiting[k]; ok {
			delete(awaiting, k)
			out[i].Outcome = c.Outcome
			out[i].Rounds++
			if c.Outcome == "input_required" {
				awaiting[k] = i
			}
			continue
		}
		c.Rounds = 1
		if c.Outcome == "input_required" {
			awaiting[k] = len(out)
		}
		out = append(out, c)
	}
	return out
}
