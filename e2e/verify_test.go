package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestVerifyOfficialServers records a cassette of each official server's scenario
// through bir-proxy --cassette, driven by the SDK host, and verifies it against the
// same server: nothing changed. server-everything is verified as a user would by
// default (its read-only tools); server-filesystem and server-memory, whose calls
// change their state, with --allow-writes against the state the recording began
// from, so that every call is made again, in order, and answers the same.
func TestVerifyOfficialServers(t *testing.T) {
	s := newSuite(t)
	bp := testutil.Build(t, "./cmd/bir-proxy")
	for _, name := range []string{"everything", "filesystem", "memory"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := scenarioNamed(t, name)
			cas := filepath.Join(t.TempDir(), "cassettes", name+".jsonl")
			r := s.runHost(t, sc, launch{mode: "cassette", callIDs: true,
				wrap: func(sc scenario) []string { return []string{bp, "--server", sc.name, "--cassette", cas, "--"} }})
			if f := r.hostFailure(); f != "" {
				t.Fatal(f)
			}
			var pixel []byte
			if name == "filesystem" {
				pixel, _ = os.ReadFile(filepath.Join(r.tmp, "fs", "pixel.png"))
			}
			// The state the recording began from.
			reset := func() {
				switch name {
				case "filesystem":
					os.RemoveAll(filepath.Join(r.tmp, "fs"))
					os.MkdirAll(filepath.Join(r.tmp, "fs"), 0o700)
					os.WriteFile(filepath.Join(r.tmp, "fs", "pixel.png"), pixel, 0o644) // as the host wrote it
				case "memory":
					os.Remove(filepath.Join(r.tmp, "memory.jsonl"))
				}
			}
			verify := func(flags ...string) (int, string, string) {
				t.Helper()
				args := append(append([]string{"verify", cas, "--json"}, flags...), "--")
				cmd := exec.CommandContext(testutil.Context(t), bp, append(args, sc.server(s, r.tmp)...)...)
				cmd.Env = append(hostEnv(), "XDG_STATE_HOME="+r.state)
				if sc.env != nil {
					cmd.Env = append(cmd.Env, sc.env(r.tmp)...)
				}
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return code, out.String(), errb.String()
			}
			// get-env answers with the server's environment, get-roots-list with the
			// host's roots (which verify, not being the host, does not have): their
			// answers change with who runs the server, by design.
			flags := []string{"--skip-tool", "get-env", "--skip-tool", "get-roots-list"}
			if name != "everything" {
				reset()
				flags = append(flags, "--allow-writes")
			}
			code, out, errs := verify(flags...)
			counts, rows := verifyRows(t, out)
			total := 0
			for _, n := range counts {
				total += n
			}
			if code != 0 || counts["same"] == 0 || counts["same"]+counts["skipped"]+counts["not_replayable"] != total {
				t.Fatalf("exit %d, %v\n%s\n%s", code, counts, out, errs)
			}
			if name != "everything" && counts["same"] != total {
				t.Errorf("with --allow-writes every call is made again: %v\n%s", counts, out)
			}
			if name == "filesystem" {
				// write_file is destructive: not run by default.
				reset()
				code, out, errs = verify("--tool", "write_file", "--tool", "list_allowed_directories")
				_, rows = verifyRows(t, out)
				if code != 0 || rows["write_file"] != "skipped" || rows["list_allowed_directories"] != "same" {
					t.Errorf("by default: exit %d %v\n%s", code, rows, errs)
				}
				if _, err := os.Stat(filepath.Join(r.tmp, "fs", "notes.md")); err == nil {
					t.Error("write_file ran without --allow-writes")
				}
			}
		})
	}
}

// verifyRows reads verify --json: the count of each status, and each tool's last status.
func verifyRows(t *testing.T, out string) (map[string]int, map[string]string) {
	t.Helper()
	counts, rows := map[string]int{}, map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line %q: %v", l, err)
		}
		if _, ok := m["summary"]; ok {
			continue
		}
		counts[m["status"].(string)]++
		rows[m["tool"].(string)] = m["status"].(string)
	}
	return counts, rows
}
