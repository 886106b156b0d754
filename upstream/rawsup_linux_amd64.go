package upstream

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// rawSup is what the supervisor forked by rawFork works from: prepared here, copied
// into the child by the fork. Its layout is rawsup_linux_amd64.s's S_* offsets.
type rawSup struct {
	path     uintptr // *byte
	argv     uintptr // **byte
	envp     uintptr // **byte
	dir      uintptr // *byte, or 0
	fdIn     int64
	fdOut    int64
	fdErr    int64
	ppid     int64
	children uintptr // *byte: "/proc/thread-self/children"
	all      uint64  // every signal
	old      uint64  // the forking thread's mask, restored after the fork
	waitset  uint64  // SIGCHLD, SIGUSR2
	zero     [4]uint64
	ts       [2]int64
	sleep    [2]int64
	status   int32
	_        int32
	info     [128]byte
	oldact   [4]uint64
	buf      [4096]byte
	sp       uintptr // the top of stack, the child's stack pointer
	stack    [8192]byte
}

func rawFork(s *rawSup) (pid, errno uintptr)

func init() {
	// The offsets the assembly uses.
	var s rawSup
	if unsafe.Offsetof(s.children) != 64 || unsafe.Offsetof(s.zero) != 96 || unsafe.Offsetof(s.status) != 160 ||
		unsafe.Offsetof(s.info) != 168 || unsafe.Offsetof(s.oldact) != 296 || unsafe.Offsetof(s.buf) != 328 ||
		unsafe.Offsetof(s.sp) != 4424 {
		panic("upstream: rawSup's layout does not match rawsup_linux_amd64.s")
	}
}

// startRawSupervisor forks the proxy into a supervisor that runs no Go code at all
// (rawsup_linux_amd64.s) and starts the server from it: the same supervisor as
// Supervise, without a second process image and Go runtime to start.
//
// The supervisor shares the proxy's memory (CLONE_VM) and reads what it needs from the
// returned keep, which must stay reachable while it runs, and not be changed.
func startRawSupervisor(path string, argv, env []string, dir string, in, out, errf *os.File) (proc *os.Process, keep any, err error) {
	cpath, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, nil, err
	}
	cargv, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return nil, nil, err
	}
	if env == nil {
		env = os.Environ()
	}
	cenv, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return nil, nil, err
	}
	var cdir *byte
	if dir != "" {
		if cdir, err = syscall.BytePtrFromString(dir); err != nil {
			return nil, nil, err
		}
	}
	children, _ := syscall.BytePtrFromString("/proc/thread-self/children")
	s := &rawSup{
		path:     uintptr(unsafe.Pointer(cpath)),
		argv:     uintptr(unsafe.Pointer(&cargv[0])),
		envp:     uintptr(unsafe.Pointer(&cenv[0])),
		dir:      uintptr(unsafe.Pointer(cdir)),
		fdIn:     int64(in.Fd()),
		fdOut:    int64(out.Fd()),
		fdErr:    int64(errf.Fd()),
		ppid:     int64(os.Getpid()),
		children: uintptr(unsafe.Pointer(children)),
		all:      ^uint64(0),
		waitset:  1<<(syscall.SIGCHLD-1) | 1<<(syscall.SIGUSR2-1),
		sleep:    [2]int64{0, 1e6},
	}
	s.sp = uintptr(unsafe.Pointer(&s.stack[len(s.stack)-64])) &^ 15
	// Everything s points to, kept reachable for as long as the supervisor runs.
	keep = []any{s, cpath, cargv, cenv, cdir, children}
	pid, errno := rawFork(s)
	runtime.KeepAlive(keep)
	if errno != 0 {
		return nil, nil, fmt.Errorf("forking the supervisor: %w", syscall.Errno(errno))
	}
	// Its own group, as Setpgid gives an exec'd one; the child sets it too, and
	// whichever is first, the group exists when this returns.
	_ = syscall.Setpgid(int(pid), int(pid))
	proc, err = os.FindProcess(int(pid))
	return proc, keep, err
}

// canForkSupervisor says the forked supervisor can do its job here: it finds the
// processes it must end in the kernel's children lists (CONFIG_PROC_CHILDREN, on in
// every common distribution's kernel); without them the exec'd one is used.
func canForkSupervisor() bool {
	_, err := os.Stat("/proc/thread-self/children")
	return err == nil
}
