package upstream

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// The supervisor is started with GOMAXPROCS=1 (a cheaper start), and the server gets
// the environment it was given, exactly: without that GOMAXPROCS, and with its own
// when it has one.
func TestSupervisorEnvIsTheServersAgain(t *testing.T) {
	for _, env := range [][]string{
		{"PATH=/bin", "A=1"},
		{"PATH=/bin", "GOMAXPROCS=4", "A=1"},
		{"GOMAXPROCS="},
		{},
	} {
		sup := supervisorEnv(env)
		if !slices.ContainsFunc(sup, func(kv string) bool { return len(kv) >= 11 && kv[:11] == "GOMAXPROCS=" }) {
			t.Errorf("supervisor's environment for %q has no GOMAXPROCS: %q", env, sup)
		}
		got := serverEnv(sup)
		if got == nil {
			got = sup // nil: the supervisor's own, unchanged
		}
		if !slices.Equal(got, env) && !(len(got) == 0 && len(env) == 0) {
			t.Errorf("server's environment %q, want %q (the supervisor had %q)", got, env, sup)
		}
	}
	// supervisorEnv must not write into the caller's slice.
	env := make([]string, 1, 8)
	env[0] = "A=1"
	_ = supervisorEnv(env)
	if got := env[:2][1]; got != "" {
		t.Errorf("supervisorEnv wrote %q past the caller's slice", got)
	}
}

// Both ways of listing the supervisor's children find a child: the kernel's lists,
// and, where it keeps none, every process's stat.
func TestChildrenAreListed(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if got := children(); !slices.Contains(got, pid) {
		t.Errorf("children() = %v, want it to hold %d", got, pid)
	}
	if got := childrenFromStat(os.Getpid()); !slices.Contains(got, pid) {
		t.Errorf("childrenFromStat = %v, want it to hold %d", got, pid)
	}
}
