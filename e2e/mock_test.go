package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestMockAnswersTheSDKHost records the probe scenario of each era through bir-proxy
// --cassette, driven by the official SDK host, then runs the same host against
// `bir-proxy mock` of those cassettes alone (no server): the host finishes every
// step, and its transcript is the recorded run's, each answer's result or error byte
// for byte (the envelope aside: the mock writes jsonrpc, id, then result).
func TestMockAnswersTheSDKHost(t *testing.T) {
	s := newSuite(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	for _, name := range []string{"probe-session", "probe-stateless"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := scenarioNamed(t, name)
			cas := filepath.Join(t.TempDir(), "cassettes", name+".jsonl")
			skip := []string{"slow cancelled by the host", "cancellations (what the server saw)",
				"confirm (multi round-trip: input_required, then the retry)"}
			rec := s.runHost(t, sc, launch{mode: "cassette", skip: skip,
				wrap: func(sc scenario) []string { return []string{bp, "--server", sc.name, "--cassette", cas, "--"} }})
			if f := rec.hostFailure(); f != "" {
				t.Fatal(f)
			}
			// Each of the host's connections is a proxy run, and each run with calls its
			// own file: the older ones rotated to CASSETTE.1, .2.
			// The recorded latency: two calls in flight are answered in the recorded order.
			args := []string{bp, "mock", "--latency", "recorded"}
			for n := cassette.DefaultKeep; n >= 1; n-- {
				if _, err := os.Stat(cassette.Rotated(cas, n)); err == nil {
					args = append(args, cassette.Rotated(cas, n))
				}
			}
			m := s.runHost(t, sc, launch{mode: "mock", remote: append(args, cas), skip: skip})
			if f := m.hostFailure(); f != "" {
				t.Fatalf("against bir-proxy mock: %s", f)
			}
			if err := compareTranscripts(answersOnly(rec.transcript), answersOnly(m.transcript)); err != nil {
				t.Error(err)
			}
		})
	}
}

// answersOnly rewrites each answer of a transcript ("<- " and a response) to its id
// and its raw result or error, and leaves out what a cassette does not hold: the
// server's own requests and notifications during a call (an elicitation, progress)
// and the host's answers to them.
func answersOnly(tr []byte) []byte {
	var kept [][]byte
	for _, l := range bytes.Split(tr, []byte("\n")) {
		msg, ok := bytes.CutPrefix(l, []byte("<- "))
		if !ok {
			if out, ok := bytes.CutPrefix(l, []byte("-> ")); ok {
				if f, ok := jsonlex.TopFields(out); ok && f.IsResponse() {
					continue
				}
			}
			kept = append(kept, l)
			continue
		}
		f, ok := jsonlex.TopFields(msg)
		if !ok || !f.IsResponse() {
			if ok {
				continue
			}
			kept = append(kept, l)
			continue
		}
		out := append([]byte("<- id "), f.ID...)
		if f.Result != nil {
			out = append(append(out, " result "...), f.Result...)
		} else {
			out = append(append(out, " error "...), f.Error...)
		}
		kept = append(kept, out)
	}
	return bytes.Join(kept, []byte("\n"))
}
