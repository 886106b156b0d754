//go:build unix

package main

import "syscall"

// logNoFollow makes the log file's open fail on a symbolic link at its path.
const logNoFollow = syscall.O_NOFOLLOW
