package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfile writes a CPU profile of the whole run to $BIR_CPUPROFILE, and the
// allocations of the whole run (sampled, as the runtime does by default) to
// $BIR_MEMPROFILE when it ends, for measuring the relay under the bench command's load
// (docs/PERFORMANCE.md).
func startProfile() (stop func()) {
	stopCPU := func() {}
	if path := os.Getenv("BIR_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
			} else {
				stopCPU = func() { pprof.StopCPUProfile(); f.Close() }
			}
		}
	}
	mem := os.Getenv("BIR_MEMPROFILE")
	return func() {
		stopCPU()
		if mem == "" {
			return
		}
		runtime.GC() // the profile is of the last GC: have one cover the whole run
		if f, err := os.Create(mem); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0) //nolint:errcheck // a profile for a person to read
			f.Close()
		}
	}
}
