package upstream

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	ossignal "os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Supervise is the program re-executed as the supervisor of one server (see
// Command.Supervisor; the proxy runs it for SuperviseArg): a child subreaper between the proxy and the server, so
// that every process the server starts — a launcher's real server, a detached
// daemon — becomes ours when its parent dies, and is ended with the session, even
// when the proxy itself is killed with SIGKILL (SPEC §6). Its stdio is the server's;
// it writes nothing but a failure to start, and exits the way the server did.
func Supervise(args []string, stdin, stdout, stderr *os.File) int {
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintln(stderr, "bir-proxy: __supervise is internal: bir-proxy __supervise -- PROGRAM [ARGS...]")
		return 2
	}
	parent := os.Getppid()
	// Before the server starts, so that nothing it starts can escape in between.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "bir-proxy: supervising: %v\n", err)
	}
	sigs := make(chan os.Signal, 8)
	// SIGUSR2: the proxy died (our parent-death signal) or asks for everything to end.
	// SIGTERM, SIGINT, SIGHUP reach the server through the process group we share; the
	// supervisor outlives them, so it can end what the server leaves behind.
	ossignal.Notify(sigs, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	if os.Getppid() != parent {
		return 128 + int(syscall.SIGKILL) // the proxy died before we could hear it
	}

	path := args[1]
	if !strings.Contains(path, "/") {
		// The proxy hands over a path it looked up; another caller may not.
		p, err := exec.LookPath(path)
		if err != nil {
			fmt.Fprintf(stderr, "bir-proxy: starting %s: %v\n", path, err)
			return 127
		}
		path = p
	}
	// syscall.ForkExec, not os/exec: the first os/exec start in a process forks a
	// throwaway child to check that pidfds work, a fork more on the way to the
	// server's first answer, and the supervisor waits for its one child itself.
	pid, err := syscall.ForkExec(path, args[1:], &syscall.ProcAttr{
		// The server's environment is ours less what the proxy set for the
		// supervisor alone (supervisorEnv).
		Env: serverEnvOr(os.Environ()),
		// Its stdio (main's, handed in) is the server's pipes, never the host's: the
		// supervisor hands them on and writes nothing to its stdout.
		Files: []uintptr{stdin.Fd(), stdout.Fd(), stderr.Fd()},
		// If the supervisor is killed outright, the server still goes with it.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(stderr, "bir-proxy: starting %s: %v\n", args[1], err)
		if errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	// Our copies of the server's stdin and stdout must go: held open here, the proxy
	// would never see the server's stdout end.
	releaseStdio(stdin, stdout)

	// The waiter only sees the server end (WNOWAIT): this goroutine reaps it, so
	// until then its pid cannot be reused, and a kill of it reaches nobody else.
	exited := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		close(exited)
	}()
	for {
		select {
		case <-exited:
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
				ws = syscall.WaitStatus(1 << 8) // status 1: the end was seen, not read
			}
			endDescendants()
			return passOn(ws)
		case s := <-sigs:
			if s != syscall.SIGUSR2 {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			endDescendants()
			return 128 + int(syscall.SIGKILL)
		}
	}
}

// serverEnvOr is serverEnv, or env itself when the proxy added nothing.
func serverEnvOr(env []string) []string {
	if e := serverEnv(env); e != nil {
		return e
	}
	return env
}

// releaseStdio points our stdin and stdout at /dev/null: the server holds the pipes
// now, and our copies would keep its stdout open after it exits.
func releaseStdio(stdin, stdout *os.File) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer null.Close()
	_ = unix.Dup2(int(null.Fd()), int(stdin.Fd()))
	_ = unix.Dup2(int(null.Fd()), int(stdout.Fd()))
}

// endDescendants kills every process that is, or has become, our child — the server's
// children reparent to us as their parents die — and reaps them, until none is left.
// Bounded: a process that cannot be killed (one in uninterruptible sleep) is left
// rather than hang the proxy's exit.
func endDescendants() {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if reap() {
			return // the kernel says we have no child left, running or not
		}
		for _, pid := range children() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if reap() {
			return
		}
		time.Sleep(time.Millisecond) // a killed process takes a moment to become reapable
	}
}

// reap collects every child that has ended, and says whether none is left at all:
// wait4 failing with ECHILD is the kernel's own count, which no listing can miss.
func reap() (none bool) {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return errors.Is(err, syscall.ECHILD)
		}
		if pid <= 0 {
			return false
		}
	}
}

// children lists our children: from /proc/self/task/*/children, the kernel's list,
// or, where the kernel does not keep one (CONFIG_PROC_CHILDREN), from every process's
// /proc/PID/stat. The first read a handful of small files where the second read one
// per process on the machine, a third of the supervisor's CPU on every exit.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		var out []int
		listed := false
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			listed = true
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					out = append(out, pid)
				}
			}
		}
		if listed {
			return out
		}
	}
	return childrenFromStat(os.Getpid())
}

// childrenFromStat lists the processes whose parent is pid, from /proc/*/stat.
func childrenFromStat(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the
		// fields are read after its last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// passOn exits the way the server did: with its status, or by the same signal, so the
// proxy reports the server's end and not the supervisor's.
func passOn(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		sig := ws.Signal()
		ossignal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(100 * time.Millisecond) // the signal is delivered; not reached for a fatal one
		return 128 + int(sig)
	}
	return ws.ExitStatus()
}
