package e2e

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// proxyMode is one way of running a scenario through bir-proxy, with what must hold
// afterwards besides the transcript being the direct one.
type proxyMode struct {
	name string
	// recorder: start a reference recorder and point the proxy at it.
	recorder bool
	env      []string
	check    func(t *testing.T, sc scenario, r *run, rec *recordertest.Server)
}

func proxyModes() []proxyMode {
	return []proxyMode{
		{
			name:     "recording",
			recorder: true,
			check: func(t *testing.T, sc scenario, r *run, rec *recordertest.Server) {
				// The host waited for the proxy to exit, so whatever it was going to
				// deliver has been delivered; a report still in its spool is one the
				// user's recorder does not show when the session is over.
				steps := rec.Steps()
				reports := make([][]byte, len(steps))
				for i, st := range steps {
					reports[i] = st.Body
				}
				for _, p := range reportProblems(sc.name, r.calls, reports, append(r.calls.Secrets, rec.Token())) {
					t.Error(p)
				}
				registered := map[string]bool{}
				for _, reg := range rec.Registrations() {
					registered[reg.ProxyID] = true
					if reg.Server != sc.name {
						t.Errorf("registration of proxy %s names server %q, want %q", reg.ProxyID, reg.Server, sc.name)
					}
					if got := reg.Get("upstream.transport").String(); got != "stdio" {
						t.Errorf("registration of proxy %s: upstream.transport is %q, want stdio", reg.ProxyID, got)
					}
				}
				for _, st := range steps {
					if !registered[st.ProxyID] {
						t.Errorf("proxy %s sent step reports but never registered", st.ProxyID)
					}
				}
			},
		},
		{
			// The default a new user gets: no recorder anywhere, reports go to the journal.
			name: "journal",
			check: func(t *testing.T, sc scenario, r *run, _ *recordertest.Server) {
				reports, err := journalReports(r.state, sc.name)
				if err != nil {
					t.Fatalf("%v (files under XDG_STATE_HOME: %v)", err, filesUnder(r.state))
				}
				for _, p := range reportProblems(sc.name, r.calls, reports, r.calls.Secrets) {
					t.Error(p)
				}
			},
		},
		{
			// A pure pipe, even with a recorder configured: nothing is sent or written.
			name:     "off",
			recorder: true,
			env:      []string{"BIR_OFF=1"},
			check: func(t *testing.T, sc scenario, r *run, rec *recordertest.Server) {
				if reqs := rec.Requests(); len(reqs) > 0 {
					t.Errorf("with BIR_OFF=1 the recorder got %d requests, the first %s %s", len(reqs), reqs[0].Method, reqs[0].Path)
				}
				if files := filesUnder(r.state); len(files) > 0 {
					t.Errorf("with BIR_OFF=1 the proxy left files under XDG_STATE_HOME (spool or journal): %v", files)
				}
			},
		},
	}
}

// TestE2E runs every scenario directly and through bir-proxy in each mode, and
// requires the proxied transcript to be the direct one, byte for byte after masking.
func TestE2E(t *testing.T) {
	s := newSuite(t)
	// Built with the race detector: a race in the proxy under real traffic exits it
	// with status 66, which the transcript's last step shows.
	proxy := testutil.BuildRace(t, "./cmd/bir-proxy")

	t.Run("host fingerprints match the contract's vectors", func(t *testing.T) {
		t.Parallel()
		vectors := testutil.ContractFile(t, "fingerprint-vectors.json")
		out, err := exec.CommandContext(testutil.Context(t), s.node, filepath.Join(s.dir, "host", "fingerprint.mjs"), vectors).CombinedOutput()
		if err != nil {
			t.Fatalf("the host-side fingerprint (the suite's reference) disagrees with the contract's vectors: %v\n%s", err, out)
		}
	})

	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			direct := s.runDirect(t, sc)
			for _, c := range direct.calls.Calls {
				if c.Outcome == "no_response" || c.Outcome == "cancel_raced" {
					t.Fatalf("%s: the scenario's call %s (%s) ended %s when run directly; the scenario must not leave that to chance",
						sc.name, c.RequestID, c.Tool, c.Outcome)
				}
			}
			for _, m := range proxyModes() {
				t.Run(m.name, func(t *testing.T) {
					t.Parallel()
					var rec *recordertest.Server
					env := m.env
					if m.recorder {
						rec = recordertest.Start(t)
						env = slices.Concat(m.env, rec.Env())
					}
					r := s.runHost(t, sc, launch{
						mode:    "proxy-" + m.name,
						wrap:    func(sc scenario) []string { return []string{proxy, "--server", sc.name, "--"} },
						env:     env,
						callIDs: true,
					})
					if err := compareTranscripts(direct.transcript, r.transcript); err != nil {
						t.Errorf("%s (%s era) through bir-proxy (%s) differs from the direct run at\n%v\n%s\nhost and proxy stderr ends:\n%s",
							sc.name, sc.era, m.name, err, r.hostFailure(), tail(r.stderr, 30))
					} else if f := r.hostFailure(); f != "" {
						t.Errorf("%s through bir-proxy (%s): %s", sc.name, m.name, f)
					}
					m.check(t, sc, r, rec)
				})
			}
		})
	}

	t.Run("remote upstreams", func(t *testing.T) {
		t.Parallel()
		testRemote(t, s, proxy)
	})

	t.Run("the suite sees a changed byte", func(t *testing.T) {
		t.Parallel()
		sc := scenarioNamed(t, "memory")
		direct := s.runDirect(t, sc)
		copied := s.runHost(t, sc, s.relay(t, "copy", false))
		if err := compareTranscripts(direct.transcript, copied.transcript); err != nil {
			t.Fatalf("a relay that only copies bytes must be invisible, but:\n%v\n%s", err, tail(copied.stderr, 20))
		}
		broken := s.runHost(t, sc, s.relay(t, "corrupt", false, relayFromEnv+"=Countess", relayToEnv+"=Countexs"))
		err := compareTranscripts(direct.transcript, broken.transcript)
		if err == nil {
			t.Fatal("a relay that changed one byte of a server message went unnoticed")
		}
		if want := `step "add_observations"`; !strings.Contains(err.Error(), want) {
			t.Fatalf("the changed byte was noticed, but the message does not name its step (%s):\n%v", want, err)
		}
		t.Logf("as intended, the suite reports:\n%v", err)
	})

	t.Run("the suite sees a correlation key reaching the server", func(t *testing.T) {
		t.Parallel()
		sc := scenarioNamed(t, "probe-stateless")
		direct := s.runDirect(t, sc)
		// A relay that copies bytes but does not strip the key, as the proxy must.
		leaky := s.runHost(t, sc, s.relay(t, "copy", true))
		err := compareTranscripts(direct.transcript, leaky.transcript)
		if err == nil {
			t.Fatal("the server received the correlation key and the suite did not notice")
		}
		if want := `step "inspect-args (the server shows what arrived)"`; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), correlationKey) {
			t.Fatalf("the leak was noticed, but the message does not point at it (%s):\n%v", want, err)
		}
		t.Logf("as intended, the suite reports:\n%v", err)
	})
}

func scenarioNamed(t *testing.T, name string) scenario {
	for _, sc := range scenarios() {
		if sc.name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return scenario{}
}
