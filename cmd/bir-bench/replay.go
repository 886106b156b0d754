package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// replayVariants are the proxy recording to a healthy reference recorder, without and
// with a steady stream of replay dispatches on the same upstream while it is measured:
// the difference between the two is what running dispatches costs the host.
func replayVariants(dir string, every time.Duration) []variant {
	var vs []variant
	for _, name := range []string{"bir-proxy/replay-none", "bir-proxy/replay-2ms"} {
		rec, err := recordertest.Listen()
		check(err)
		v := variant{name: name, env: append(rec.Env(), "BIR_OFF=0"), stateRoot: dir, rec: rec, recorder: localRecorder{rec}, reportLag: new([2]time.Duration)}
		if strings.HasSuffix(name, "2ms") {
			v.feed = &feeder{rec: rec, every: every}
		}
		vs = append(vs, v)
	}
	return vs
}

// proxyIDOf waits for the proxy to have registered with rec and returns its proxyId.
func proxyIDOf(rec *recordertest.Server, p *proc) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pid := p.cmd.Process.Pid
	snap, err := rec.Wait(ctx, func(s recordertest.Snapshot) bool {
		return slices.ContainsFunc(s.Registrations, func(r recordertest.Registration) bool { return r.PID == pid })
	})
	if err != nil {
		log.Fatalf("the proxy (pid %d) did not register: %v", pid, err)
	}
	i := slices.IndexFunc(snap.Registrations, func(r recordertest.Registration) bool { return r.PID == pid })
	return snap.Registrations[i].ProxyID
}

// feeder queues one echo dispatch per interval at its recorder while it is started.
type feeder struct {
	rec     *recordertest.Server
	every   time.Duration
	proxyID string
	queued  int
	at      map[string]time.Time // dispatchId → when it was queued
}

// start begins feeding and returns the function that stops it (waiting for the feeding
// goroutine to end). On a nil feeder both do nothing.
func (f *feeder) start() func() {
	if f == nil {
		return func() {}
	}
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(f.every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				id := "bench-" + strconv.Itoa(f.queued)
				f.queued++
				f.at[id] = time.Now()
				f.rec.Dispatch(f.proxyID, recordertest.Dispatch{DispatchID: id, Tool: "echo", Arguments: json.RawMessage(`{"text":"replayed"}`)})
			}
		}
	})
	return func() { close(stop); wg.Wait() }
}

// settle waits for every queued dispatch's result.
func (f *feeder) settle() {
	if f == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.rec.Wait(ctx, func(s recordertest.Snapshot) bool { return len(s.Results) >= f.queued }); err != nil {
		log.Printf("not every dispatch was posted: %v", err)
	}
}

func (f *feeder) ok() int {
	n := 0
	for _, r := range f.rec.Results() {
		if r.Outcome == "ok" {
			n++
		}
	}
	return n
}

// lag is how long after a dispatch was queued its result reached the recorder.
func (f *feeder) lag() string {
	var ds []time.Duration
	for _, r := range f.rec.Results() {
		if t, ok := f.at[r.DispatchID]; ok {
			ds = append(ds, r.At.Sub(t))
		}
	}
	if len(ds) == 0 {
		return "no results"
	}
	slices.Sort(ds)
	return fmt.Sprintf("result at the recorder %s after it was queued, p50; p99 %s", ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond))
}

// idleWakeups watches an idle proxy for d after one call: how often any of its threads
// ran (a context switch, sampled every 20 ms), and how many of those runs were not
// within 100 ms of a poll the recorder answered.
func idleWakeups(v variant, d time.Duration) string {
	p := start(v)
	defer p.stop()
	initialize(p)
	p.roundTrip(call(1))
	pid := p.cmd.Process.Pid
	time.Sleep(time.Second) // the spool's fsync window, first GC, the first register
	const step = 20 * time.Millisecond
	var woke []time.Time
	last := switches(pid)
	cpu0 := cpuTime(pid)
	t0 := time.Now()
	for time.Since(t0) < d {
		time.Sleep(step)
		if n := switches(pid); n != last {
			woke = append(woke, time.Now())
			last = n
		}
	}
	cpu := cpuTime(pid) - cpu0
	var polls []time.Time
	if v.rec != nil {
		for _, r := range v.rec.Requests() {
			if r.Path == "/proxy/poll" && r.At.After(t0) {
				polls = append(polls, r.At)
			}
		}
	}
	other := 0
	for _, w := range woke {
		near := slices.ContainsFunc(polls, func(pt time.Time) bool {
			return w.Sub(pt) > -100*time.Millisecond && w.Sub(pt) < 100*time.Millisecond+step
		})
		if !near {
			other++
		}
	}
	return fmt.Sprintf("%d intervals with a thread run (of %d), %d polls answered, %d runs not at a poll; CPU %s",
		len(woke), int(d/step), len(polls), other, cpu)
}

// switches is the sum of every thread's context switches, from /proc.
func switches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			for _, field := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if rest, ok := strings.CutPrefix(line, field); ok {
					k, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
					n += k
				}
			}
		}
	}
	return n
}
