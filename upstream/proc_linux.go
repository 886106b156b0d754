package upstream

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group, so a Ctrl-C meant for the host's terminal group is not also
		// delivered straight to the server, and so the stop sequence reaches the
		// server's own children.
		Setpgid: true,
		// The kernel kills the server when the proxy dies, even by SIGKILL, when no
		// code of ours runs. SIGKILL, not SIGTERM: a server that ignores SIGTERM would
		// otherwise outlive us.
		Pdeathsig: syscall.SIGKILL,
	}
}

// enlargePipe raises a pipe's buffer from 64 KiB towards 1 MiB, so a multi-megabyte
// message crosses in a sixteenth of the wakeups. It is best-effort: the kernel caps
// pipe sizes per user, and the default still works.
func enlargePipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// SyscallConn, not Fd: Fd would put the pipe back in blocking mode and take it
	// off the runtime poller.
	_ = rc.Control(func(fd uintptr) {
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20)
	})
}

// Supervised says a Command's Supervisor is used here: Linux has child subreapers and
// parent-death signals, which are what make one work.
const Supervised = true

// sigKillAll asks a supervisor to kill the server and every descendant, then exit.
const sigKillAll = syscall.SIGUSR2

// setSupervisorAttr makes the parent-death signal one the supervisor catches: killed
// by SIGKILL it could not end the server's descendants first.
func setSupervisorAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr.Pdeathsig = sigKillAll
}

// supervisorUnset names, in a supervisor's environment, the variables the proxy set
// for the supervisor alone, which it removes again before it starts the server.
const supervisorUnset = "BIR_SUPERVISOR_UNSET"

// supervisorEnv is the environment a supervisor is started with: the server's, plus
// GOMAXPROCS=1 when the server's does not set it. The supervisor does nothing in
// parallel, and a Go runtime told its GOMAXPROCS neither reads the cgroup files for a
// default nor starts threads for a second P: measured, a millisecond of the
// supervisor's start, which is on the way to the server's first answer (issue 26).
func supervisorEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return env
		}
	}
	return append(slices.Clip(env), "GOMAXPROCS=1", supervisorUnset+"=GOMAXPROCS")
}

// serverEnv is the environment a supervisor starts the server with: its own, less
// what supervisorEnv added (nil: its own, unchanged).
func serverEnv(env []string) []string {
	unset := []string{}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, supervisorUnset+"="); ok {
			unset = append(strings.Split(v, ","), supervisorUnset)
		}
	}
	if len(unset) == 0 {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(unset, k)
	})
}
