package main

import (
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile of the whole run to $BIR_CPUPROFILE, for measuring
// the relay under the bench command's load (docs/PERFORMANCE.md).
func startProfile() (stop func()) {
	path := os.Getenv("BIR_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
