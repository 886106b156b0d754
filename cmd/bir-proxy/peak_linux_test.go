package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// runPeakRSS runs cmd to its end and returns Wait's error and the process's peak
// resident memory (VmHWM, read every 2 ms until it exits); past killAbove (when not
// 0) it is killed, before an unbounded one takes the machine's memory. wait4's Maxrss is no use
// for a child of a test: started by vfork, it begins with its parent's peak, and a
// package whose earlier tests grew the test process to 776 MiB failed a 512 MiB
// bound on a verify that took a tenth of that (TestVerifyHugeDiffIsClipped).
func runPeakRSS(cmd *exec.Cmd, killAbove int64) (peak int64, err error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var hwm atomic.Int64
	watched := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(watched)
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		for {
			b, err := os.ReadFile(status)
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
					if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb<<10 > hwm.Load() {
						hwm.Store(kb << 10)
					}
					if killAbove > 0 && hwm.Load() > killAbove {
						cmd.Process.Kill()
					}
				}
			}
			select {
			case <-exited:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	err = cmd.Wait()
	close(exited)
	<-watched
	return hwm.Load(), err
}
