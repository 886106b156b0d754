package main

import (
	"os"
	"strings"
	"testing"

	"github.com/bir-dev/bir-proxy/internal/testutil"
)

// TestSupervisorSettingsDoNotReachTheServer: the supervisor runs with GOMAXPROCS=1 (a
// faster start, issue 26); the server behind it sees its own environment, without it,
// or with the GOMAXPROCS it was given.
func TestSupervisorSettingsDoNotReachTheServer(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	for _, own := range []string{"", "GOMAXPROCS=3"} {
		if own == "" && os.Getenv("GOMAXPROCS") != "" {
			continue // the test's own environment gives the server one
		}
		var env []string
		if own != "" {
			env = append(env, own)
		}
		s := startProxy(t, env, "--", raw, "--reply", "--env")
		s.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"env","arguments":{}}}`)
		got := s.recv()
		switch {
		case strings.Contains(got, "BIR_SUPERVISOR"):
			t.Fatalf("server saw the supervisor's marker: %s", got)
		case own == "" && strings.Contains(got, "GOMAXPROCS="):
			t.Fatalf("server saw the supervisor's GOMAXPROCS: %s", got)
		case own != "" && (!strings.Contains(got, own) || strings.Count(got, "GOMAXPROCS=") != 1):
			t.Fatalf("server did not see its own %s once: %s", own, got)
		}
		s.end()
	}
}
