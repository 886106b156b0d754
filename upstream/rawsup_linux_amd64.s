#include "textflag.h"

#define SYS_read 0
#define SYS_close 3
#define SYS_rt_sigaction 13
#define SYS_rt_sigprocmask 14
#define SYS_dup2 33
#define SYS_nanosleep 35
#define SYS_sched_yield 24
#define SYS_getpid 39
#define SYS_clone 56
#define SYS_execve 59
#define SYS_exit_group 231
#define SYS_wait4 61
#define SYS_kill 62
#define SYS_chdir 80
#define SYS_setpgid 109
#define SYS_getppid 110
#define SYS_rt_sigtimedwait 128
#define SYS_prctl 157
#define SYS_clock_gettime 228
#define SYS_openat 257
#define SYS_close_range 436
#define SYS_prlimit64 302

// rawSup offsets (rawsup_linux_amd64.go)
#define S_PATH 0
#define S_ARGV 8
#define S_ENVP 16
#define S_DIR 24
#define S_FDIN 32
#define S_FDOUT 40
#define S_FDERR 48
#define S_PPID 56
#define S_CHILDREN 64
#define S_ALL 72
#define S_OLD 80
#define S_WAITSET 88
#define S_ZERO 96
#define S_TS 128
#define S_SLEEP 144
#define S_STATUS 160
#define S_INFO 168
#define S_OLDACT 296
#define S_BUF 328
#define BUFSIZE 4096
#define S_SP 4424

// func rawFork(s *rawSup) (pid, errno uintptr)
TEXT ·rawFork(SB),NOSPLIT,$0-24
	MOVQ s+0(FP), BX
	// Every signal blocked on this thread across the fork: the child never runs Go
	// code, and must not run Go's handlers either.
	MOVQ $SYS_rt_sigprocmask, AX
	MOVQ $2, DI
	LEAQ S_ALL(BX), SI
	LEAQ S_OLD(BX), DX
	MOVQ $8, R10
	SYSCALL
	// CLONE_VM|SIGCHLD, on a stack of its own inside s: the child shares the proxy's
	// memory (nothing is copied, nothing pinned) and touches only s.
	MOVQ $SYS_clone, AX
	MOVQ $0x111, DI
	MOVQ S_SP(BX), SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	SYSCALL
	CMPQ AX, $0
	JEQ child
	MOVQ AX, R12
	MOVQ $SYS_rt_sigprocmask, AX
	MOVQ $2, DI
	LEAQ S_OLD(BX), SI
	XORQ DX, DX
	MOVQ $8, R10
	SYSCALL
	CMPQ R12, $0
	JLT forkfailed
	MOVQ R12, pid+8(FP)
	MOVQ $0, errno+16(FP)
	RET
forkfailed:
	NEGQ R12
	MOVQ $0, pid+8(FP)
	MOVQ R12, errno+16(FP)
	RET

	// The supervisor. BX: s; R12: the server's pid; R13: 1 to exit as killed, 0 to
	// exit as the server did; R15: the clean-up's deadline.
child:
	MOVQ $SYS_setpgid, AX
	XORQ DI, DI
	XORQ SI, SI
	SYSCALL
	MOVQ $SYS_prctl, AX
	MOVQ $36, DI // PR_SET_CHILD_SUBREAPER
	MOVQ $1, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	SYSCALL
	MOVQ $SYS_prctl, AX
	MOVQ $1, DI // PR_SET_PDEATHSIG
	MOVQ $12, SI // SIGUSR2, blocked: read by sigtimedwait below
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	SYSCALL
	XORQ R12, R12
	MOVQ $1, R13
	MOVQ $SYS_getppid, AX
	SYSCALL
	CMPQ AX, S_PPID(BX)
	JNE killall // the proxy died before its death could be heard

	// The server's pipes become 0, 1 and 2; nothing else of the proxy's stays open.
	MOVQ $SYS_dup2, AX
	MOVQ S_FDIN(BX), DI
	MOVQ $0, SI
	SYSCALL
	MOVQ $SYS_dup2, AX
	MOVQ S_FDOUT(BX), DI
	MOVQ $1, SI
	SYSCALL
	MOVQ $SYS_dup2, AX
	MOVQ S_FDERR(BX), DI
	MOVQ $2, SI
	SYSCALL
	MOVQ $SYS_close_range, AX
	MOVQ $3, DI
	MOVQ $0xffffffff, SI
	XORQ DX, DX
	SYSCALL
	CMPQ AX, $0
	JEQ closed
	MOVQ $3, R8 // no close_range (before Linux 5.9): one by one
closeloop:
	MOVQ $SYS_close, AX
	MOVQ R8, DI
	SYSCALL
	INCQ R8
	CMPQ R8, $65536
	JLT closeloop
closed:
	MOVQ S_DIR(BX), DI
	CMPQ DI, $0
	JEQ nodir
	MOVQ $SYS_chdir, AX
	SYSCALL
	CMPQ AX, $0
	JNE dirfailed
nodir:
	MOVQ $SYS_getpid, AX
	SYSCALL
	MOVQ AX, R14 // ours, for the server's check
	// CLONE_VM|CLONE_VFORK|SIGCHLD: we wait until the server's exec, as os/exec does.
	MOVQ $SYS_clone, AX
	MOVQ $0x4111, DI
	XORQ SI, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	SYSCALL
	CMPQ AX, $0
	JEQ server
	JLT startfailed
	MOVQ AX, R12
	MOVQ $0, R13
	// The server holds its stdin and stdout now: ours would keep its stdout open.
	MOVQ $SYS_close, AX
	MOVQ $0, DI
	SYSCALL
	MOVQ $SYS_close, AX
	MOVQ $1, DI
	SYSCALL

waitloop:
	MOVQ $SYS_rt_sigtimedwait, AX
	LEAQ S_WAITSET(BX), DI
	LEAQ S_INFO(BX), SI
	XORQ DX, DX
	MOVQ $8, R10
	SYSCALL
	CMPQ AX, $12
	JEQ proxygone
reaploop:
	MOVQ $SYS_wait4, AX
	MOVQ $-1, DI
	LEAQ S_STATUS(BX), SI
	MOVQ $1, DX // WNOHANG
	XORQ R10, R10
	SYSCALL
	CMPQ AX, $0
	JEQ waitloop
	JLT serverlost
	CMPQ AX, R12
	JNE reaploop // an orphan of the server's, reparented to us, ended
	JMP killall // the server ended: its status is in S_STATUS
serverlost:
	MOVL $0x100, S_STATUS(BX) // status 1: its end was not seen
	JMP killall
proxygone:
	MOVQ $SYS_kill, AX
	MOVQ R12, DI
	MOVQ $9, SI
	SYSCALL
	MOVQ $1, R13

	// Kill every child (the server's descendants are reparented to us as their
	// parents die) and reap them until wait4 says none is left, for at most 2 s.
killall:
	XORQ R14, R14
	MOVQ $SYS_clock_gettime, AX
	MOVQ $1, DI // CLOCK_MONOTONIC
	LEAQ S_TS(BX), SI
	SYSCALL
	MOVQ S_TS(BX), R15
	IMULQ $1000000000, R15
	ADDQ S_TS+8(BX), R15
	ADDQ $2000000000, R15
killpass:
	MOVQ $SYS_wait4, AX
	MOVQ $-1, DI
	XORQ SI, SI
	MOVQ $1, DX
	XORQ R10, R10
	SYSCALL
	CMPQ AX, $0
	JGT killpass
	JLT done // ECHILD: no child left at all
	MOVQ $SYS_openat, AX
	MOVQ $-100, DI // AT_FDCWD
	MOVQ S_CHILDREN(BX), SI
	MOVQ $0x80000, DX // O_RDONLY|O_CLOEXEC
	XORQ R10, R10
	SYSCALL
	CMPQ AX, $0
	JLT pause
	MOVQ AX, R8
	MOVQ $SYS_read, AX
	MOVQ R8, DI
	LEAQ S_BUF(BX), SI
	MOVQ $BUFSIZE, DX
	SYSCALL
	MOVQ AX, R9
	MOVQ $SYS_close, AX
	MOVQ R8, DI
	SYSCALL
	CMPQ R9, $0
	JLE pause
	LEAQ S_BUF(BX), R8 // R8: next byte; R9: bytes left; R10: the number so far
	XORQ R10, R10
parse:
	CMPQ R9, $0
	JEQ flush
	MOVBQZX (R8), AX
	INCQ R8
	DECQ R9
	SUBQ $48, AX
	CMPQ AX, $9
	JHI flush // not a digit (unsigned: below '0' wraps)
	IMULQ $10, R10
	ADDQ AX, R10
	JMP parse
flush:
	CMPQ R10, $0
	JLE next
	MOVQ $SYS_kill, AX
	MOVQ R10, DI
	MOVQ $9, SI
	SYSCALL
	MOVQ $1, R14 // this pass killed: the next one comes at once
next:
	XORQ R10, R10
	CMPQ R9, $0
	JGT parse
pause:
	// After a pass that killed, only a yield: each killed process's children become
	// ours when it has died, and a chain of them, each the next one's parent, is
	// ended one level a pass (a millisecond's sleep a pass let a chain of 4000 outlast
	// the bound).
	CMPQ R14, $0
	JEQ sleep
	XORQ R14, R14
	MOVQ $SYS_sched_yield, AX
	SYSCALL
	JMP clock
sleep:
	MOVQ $SYS_nanosleep, AX
	LEAQ S_SLEEP(BX), DI
	XORQ SI, SI
	SYSCALL
clock:
	MOVQ $SYS_clock_gettime, AX
	MOVQ $1, DI
	LEAQ S_TS(BX), SI
	SYSCALL
	MOVQ S_TS(BX), AX
	IMULQ $1000000000, AX
	ADDQ S_TS+8(BX), AX
	CMPQ AX, R15
	JLT killpass

done:
	CMPQ R13, $0
	JNE exitkilled
	MOVL S_STATUS(BX), AX
	MOVL AX, DX
	ANDL $0x7f, DX
	JNE resignal
	SHRL $8, AX
	ANDL $0xff, AX
	MOVQ AX, DI
	MOVQ $SYS_exit_group, AX
	SYSCALL
resignal:
	// Killed by a signal: die of the same one, so the proxy reports the server's end.
	MOVQ DX, R12
	MOVQ $SYS_rt_sigaction, AX
	MOVQ R12, DI
	LEAQ S_ZERO(BX), SI // SIG_DFL
	XORQ DX, DX
	MOVQ $8, R10
	SYSCALL
	MOVQ R12, CX
	DECQ CX
	MOVQ $1, AX
	SHLQ CX, AX
	MOVQ AX, S_TS(BX)
	MOVQ $SYS_rt_sigprocmask, AX
	MOVQ $1, DI // SIG_UNBLOCK
	LEAQ S_TS(BX), SI
	XORQ DX, DX
	MOVQ $8, R10
	SYSCALL
	// RLIMIT_CORE 1, which no core dump passes (a file needs a page, and a pipe
	// takes 1 for a crash of its own collector): this process's memory is the
	// proxy's, and a core-dumping signal would write all of it out, the recorder's
	// token with it. Where the hard limit forbids even 1, the status alone.
	MOVQ $1, S_SLEEP(BX)
	MOVQ $1, S_SLEEP+8(BX)
	MOVQ $SYS_prlimit64, AX
	XORQ DI, DI
	MOVQ $4, SI // RLIMIT_CORE
	LEAQ S_SLEEP(BX), DX
	XORQ R10, R10
	SYSCALL
	CMPQ AX, $0
	JNE exitsignaled
	MOVQ $SYS_getpid, AX
	SYSCALL
	MOVQ AX, DI
	MOVQ $SYS_kill, AX
	MOVQ R12, SI
	SYSCALL
exitsignaled:
	MOVQ R12, DI
	ADDQ $128, DI
	MOVQ $SYS_exit_group, AX
	SYSCALL
exitkilled:
	MOVQ $137, DI
	MOVQ $SYS_exit_group, AX
	SYSCALL
dirfailed:
	MOVQ $126, DI
	MOVQ $SYS_exit_group, AX
	SYSCALL
startfailed:
	MOVQ $126, DI
	MOVQ $SYS_exit_group, AX
	SYSCALL

	// The server: its parent-death signal, default signal handlers, nothing blocked,
	// then its program.
server:
	MOVQ $SYS_prctl, AX
	MOVQ $1, DI
	MOVQ $9, SI
	XORQ DX, DX
	XORQ R10, R10
	XORQ R8, R8
	SYSCALL
	MOVQ $SYS_getppid, AX
	SYSCALL
	CMPQ AX, R14
	JNE exitkilled
	MOVQ $1, R12
resetloop:
	CMPQ R12, $9
	JEQ resetnext
	CMPQ R12, $19
	JEQ resetnext
	MOVQ $SYS_rt_sigaction, AX
	MOVQ R12, DI
	XORQ SI, SI
	LEAQ S_OLDACT(BX), DX
	MOVQ $8, R10
	SYSCALL
	CMPQ AX, $0
	JNE resetnext
	MOVQ S_OLDACT(BX), AX
	CMPQ AX, $1 // SIG_IGN stays ignored, as across any exec
	JEQ resetnext
	MOVQ $SYS_rt_sigaction, AX
	MOVQ R12, DI
	LEAQ S_ZERO(BX), SI
	XORQ DX, DX
	MOVQ $8, R10
	SYSCALL
resetnext:
	INCQ R12
	CMPQ R12, $65
	JLT resetloop
	MOVQ $SYS_rt_sigprocmask, AX
	MOVQ $2, DI
	LEAQ S_ZERO(BX), SI // the empty set
	XORQ DX, DX
	MOVQ $8, R10
	SYSCALL
	MOVQ $SYS_execve, AX
	MOVQ S_PATH(BX), DI
	MOVQ S_ARGV(BX), SI
	MOVQ S_ENVP(BX), DX
	SYSCALL
	MOVQ $126, DI
	CMPQ AX, $-2 // ENOENT
	JNE execfailed
	MOVQ $127, DI
execfailed:
	MOVQ $SYS_exit_group, AX
	SYSCALL
