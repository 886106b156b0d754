package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	for _, c := range []struct{ mode, own string }{{"", ""}, {"", "GOMAXPROCS=3"}, {"exec", ""}, {"exec", "GOMAXPROCS=3"}} {
		own := c.own
		if own == "" && os.Getenv("GOMAXPROCS") != "" {
			continue // the test's own environment gives the server one
		}
		env := []string{"BIR_SUPERVISE=" + c.mode}
		if c.mode == "" {
			env = []string{"BIR_SUPERVISE=1"}
		}
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

// TestSupervisorIsForkedHoldingOnlyStderr: on linux/amd64 the supervisor is a fork of
// the proxy (no "__supervise" process image: the start it saves is issue 26's), and
// it holds no descriptor of the proxy's but the server's stderr — not the host's
// stdin or stdout, nor the server's stdin, whose end the server must see. With
// BIR_SUPERVISE=exec it is the exec'd one.
func TestSupervisorIsForkedHoldingOnlyStderr(t *testing.T) {
	t.Parallel()
	raw := testutil.Build(t, "./testdata/rawserver")
	for _, mode := range []string{"1", "exec"} {
		pidfile := filepath.Join(t.TempDir(), "pid")
		s := startProxy(t, []string{"BIR_SUPERVISE=" + mode}, "--", raw, "--echo", "--pidfile", pidfile)
		s.Send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		s.recv()
		server := testutil.ReadPidfile(t, pidfile)
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(server) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+1:])
		sup := f[1]
		cmdline, err := os.ReadFile("/proc/" + sup + "/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		execd := strings.Contains(string(cmdline), "__supervise")
		switch {
		case mode == "exec" && !execd:
			t.Errorf("BIR_SUPERVISE=exec: the supervisor %s runs %q, want bir-proxy __supervise", sup, cmdline)
		case mode == "1" && runtime.GOARCH == "amd64" && execd:
			t.Errorf("the supervisor %s was exec'd (%q), want a fork of the proxy", sup, cmdline)
		case mode == "1" && runtime.GOARCH == "amd64":
			fds, err := os.ReadDir("/proc/" + sup + "/fd")
			if err != nil {
				t.Fatal(err)
			}
			if len(fds) != 1 || fds[0].Name() != "2" {
				var names []string
				for _, fd := range fds {
					names = append(names, fd.Name())
				}
				t.Errorf("the forked supervisor holds descriptors %v, want only 2 (the server's stderr)", names)
			}
		}
		s.end()
	}
}

// TestSIGKILLedProxyLeavesNoDescendantEitherSupervisor is
// TestSIGKILLedProxyLeavesNoDescendant with each supervisor named: the forked one
// (linux/amd64's default) and the exec'd one (BIR_SUPERVISE=exec, every other
// architecture's), a server and its grandchild, detached or not.
func TestSIGKILLedProxyLeavesNoDescendantEitherSupervisor(t *testing.T) {
	for _, mode := range []string{"1", "exec"} {
		sigkillLeavesNoDescendant(t, []string{"BIR_OFF=1", "BIR_SUPERVISE=" + mode}, "BIR_SUPERVISE="+mode+" ")
	}
}
