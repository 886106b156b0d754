//go:build !linux

package main

import "log"

// verifyWorkload reads a process's CPU and memory from /proc and waitid: Linux only.
func verifyWorkload(_ map[string]string, _ string, _, _ int, _, _ string) {
	log.Print("bir-bench: the verify workload runs on Linux only; skipped")
}
