//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/sys/unix"
)

// The verify workload (issue 22, "How fast"): bir-proxy verify's own cost per call,
// against the proxy's relay cost for the same calls in the same run. A cassette of n
// echo calls is recorded through the built bir-proxy --cassette in front of the raw
// fixture, then replayed with `bir-proxy verify CASSETTE --allow-writes --json --
// rawserver --reply`; rounds interleave the direct and proxied round trips with verify
// runs of a 1-call cassette (its startup: the process, the server, the handshake,
// tools/list) and of the n-call one.
//
//	verify's own wall per call = (wall(n) - wall(1)) / (n-1) - the direct round trip
//	verify's own CPU per call  = (CPU(n) - CPU(1)) / (n-1), verify's process alone
//	the relay's wall per call  = proxy round trip - direct round trip (p50, and mean)
//	the relay's CPU per call   = the proxy's process alone, per call
//
// A process's own CPU is read from /proc/PID/stat without its children's (the
// supervisor and the server): for verify once it has exited and before it is reaped
// (waitid WNOWAIT), when its zombie's stat holds its final times.

// verifySample is one run of bir-proxy verify.
type verifySample struct {
	wall, self, below time.Duration // below: its waited-for descendants (supervisor, server)
	hwm               int64         // verify's own peak RSS (VmHWM), last seen before it exited
	maxrss            int64         // rusage: the largest of verify and its descendants
	same              int64
}

// relaySample is one round of n sequential calls of a variant.
type relaySample struct {
	p50, mean time.Duration
	self      time.Duration // the variant's own process, per call
	below     time.Duration // its descendants still running (the server), per call
}

func verifyWorkload(bins map[string]string, dir string, n, rounds int, profile, also string) {
	server := []string{bins["rawserver"], "--reply"}
	proxyArgv := append([]string{bins["bir-proxy"], "--server", "bench", "--"}, server...)
	fmt.Printf("bir-proxy verify against the proxy's relay, %d calls, %d rounds interleaved (-verify-n, -verify-rounds):\n", n, rounds)
	t0 := time.Now()
	one := recordCassette(bins, dir, server, 1)
	many := recordCassette(bins, dir, server, n)
	ten := recordCassette(bins, dir, server, 10*n)
	fmt.Printf("  recorded cassettes of 1, %d and %d calls through bir-proxy --cassette in %s\n", n, 10*n, time.Since(t0).Round(time.Millisecond))

	vs := []variant{
		{name: "direct", argv: server},
		{name: "bir-proxy", argv: proxyArgv, env: []string{"BIR_OFF=1"}},
	}
	type verifier struct {
		name, bin string
		v1, vn    []verifySample
		v10       verifySample
	}
	vfs := []*verifier{{name: "verify", bin: bins["bir-proxy"]}}
	if also != "" {
		vfs = append(vfs, &verifier{name: "also:verify", bin: also})
	}
	relay := map[string][]relaySample{}
	for r := range rounds {
		steps := []func(){func() {
			for _, i := range roundOrder(len(vs), r) {
				relay[vs[i].name] = append(relay[vs[i].name], relayRound(vs[i], n))
			}
		}}
		for _, vf := range vfs {
			steps = append(steps,
				func() { vf.v1 = append(vf.v1, runVerify(vf.bin, dir, server, one, 1)) },
				func() { vf.vn = append(vf.vn, runVerify(vf.bin, dir, server, many, n)) })
		}
		for _, i := range roundOrder(len(steps), r) {
			steps[i]()
		}
	}
	for _, vf := range vfs {
		vf.v10 = runVerify(vf.bin, dir, server, ten, 10*n)
	}
	if profile == "verify" {
		// One more run, not measured: profiling costs.
		base := filepath.Join(must(os.Getwd()), "bench-verify")
		runVerify(bins["bir-proxy"], dir, server, ten, 10*n, "BIR_CPUPROFILE="+base+".prof", "BIR_MEMPROFILE="+base+".mem.prof")
		fmt.Printf("  profiled one more %d-call run: %s.prof, %s.mem.prof\n", 10*n, base, base)
	}

	med := func(xs []time.Duration) time.Duration {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	field := func(ss []relaySample, f func(relaySample) time.Duration) time.Duration {
		var xs []time.Duration
		for _, s := range ss {
			xs = append(xs, f(s))
		}
		return med(xs)
	}
	d, p := relay["direct"], relay["bir-proxy"]
	dP50, dMean := field(d, func(s relaySample) time.Duration { return s.p50 }), field(d, func(s relaySample) time.Duration { return s.mean })
	pP50, pMean := field(p, func(s relaySample) time.Duration { return s.p50 }), field(p, func(s relaySample) time.Duration { return s.mean })
	serverCPU := field(d, func(s relaySample) time.Duration { return s.self })
	proxyCPU := field(p, func(s relaySample) time.Duration { return s.self })
	proxyServerCPU := field(p, func(s relaySample) time.Duration { return s.below })
	fmt.Printf("  %-24s p50 %8s  mean %8s  server CPU/call %8s\n", "direct", dP50, dMean, serverCPU)
	fmt.Printf("  %-24s p50 %8s  mean %8s  proxy CPU/call %8s  (its server %s)\n", "bir-proxy", pP50, pMean, proxyCPU, proxyServerCPU)
	fmt.Printf("  %-24s p50 %8s  mean %8s  CPU/call %8s\n", "the relay's own", pP50-dP50, pMean-dMean, proxyCPU)

	for _, vf := range vfs {
		// Per round: the n-call run less the same round's 1-call run.
		var wallPer, cpuPer, belowPer, wall1, cpu1, below1 []time.Duration
		for i := range vf.vn {
			per := func(f func(verifySample) time.Duration) time.Duration {
				return (f(vf.vn[i]) - f(vf.v1[i])) / time.Duration(n-1)
			}
			wallPer = append(wallPer, per(func(s verifySample) time.Duration { return s.wall }))
			cpuPer = append(cpuPer, per(func(s verifySample) time.Duration { return s.self }))
			belowPer = append(belowPer, per(func(s verifySample) time.Duration { return s.below }))
			wall1, cpu1, below1 = append(wall1, vf.v1[i].wall), append(cpu1, vf.v1[i].self), append(below1, vf.v1[i].below)
		}
		vWall, vCPU, vBelow := med(wallPer), med(cpuPer), med(belowPer)
		ownWall := vWall - dMean
		fmt.Printf("  %-24s startup (a 1-call cassette) wall %s, CPU %s (its supervisor and server %s)\n", vf.name, med(wall1).Round(10*time.Microsecond), med(cpu1), med(below1))
		fmt.Printf("  %-24s per call: wall %8s, less the direct round trip (mean) %8s; CPU %8s (its server %s)\n", vf.name, vWall, ownWall, vCPU, vBelow)
		fmt.Printf("  %-24s own wall/call %.2fx the relay's (mean; %.2fx its p50)  CPU/call %.2fx the proxy's\n", vf.name,
			ratio(ownWall, pMean-dMean), ratio(ownWall, pP50-dP50), ratio(vCPU, proxyCPU))
		hwmN := slices.MaxFunc(vf.vn, func(a, b verifySample) int { return int(a.hwm - b.hwm) })
		fmt.Printf("  %-24s peak RSS %d calls %.1f MiB, %d calls %.1f MiB (%.2fx); rusage with the server %.1f, %.1f MiB\n", vf.name,
			n, mib(hwmN.hwm), 10*n, mib(vf.v10.hwm), float64(vf.v10.hwm)/float64(hwmN.hwm), mib(hwmN.maxrss), mib(vf.v10.maxrss))
		fmt.Printf("  %-24s %d calls: wall %s/call, CPU %s/call (less the median startup)\n", vf.name, 10*n,
			(vf.v10.wall-med(wall1))/time.Duration(10*n-1), (vf.v10.self-med(cpu1))/time.Duration(10*n-1))
	}
	fmt.Println()
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// recordCassette records calls echo calls through bir-proxy --cassette in front of
// the fixture, as a host would make them (initialize, tools/list, then the calls).
func recordCassette(bins map[string]string, dir string, server []string, calls int) string {
	path := filepath.Join(dir, "cassettes", "c"+strconv.Itoa(calls)+".jsonl")
	v := variant{
		name:      "bir-proxy/cassette",
		argv:      append([]string{bins["bir-proxy"], "--server", "bench", "--cassette", path, "--"}, server...),
		env:       []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_RECORDER_TOKEN="},
		stateRoot: dir,
	}
	p := start(v)
	initialize(p)
	p.roundTrip([]byte(`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`))
	for i := range calls {
		p.roundTrip(call(i + 1))
	}
	p.stop()
	got := 0
	f := must(os.Open(path))
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if gjson.GetBytes(sc.Bytes(), "seq").Exists() {
			got++
		}
	}
	check(sc.Err())
	if got != calls {
		log.Fatalf("the cassette %s holds %d calls, want %d", path, got, calls)
	}
	return path
}

// runVerify runs bir-proxy verify on the cassette and checks that every call was the
// same.
func runVerify(bin string, dir string, server []string, cassette string, calls int, env ...string) verifySample {
	argv := append([]string{"verify", cassette, "--allow-writes", "--json", "--"}, server...)
	cmd := exec.Command(bin, argv...)
	cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+must(os.MkdirTemp(dir, "state-"))), env...)
	cmd.Stderr = os.Stderr
	out := must(cmd.StdoutPipe())
	t0 := time.Now()
	check(cmd.Start())
	pid := cmd.Process.Pid
	var last []byte
	read := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(out, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				last = line
			}
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				read <- err
				return
			}
		}
	}()
	// Its own peak RSS, until it exits: a zombie has no memory to report.
	hwm := make(chan int64, 1)
	stop := make(chan struct{})
	go func() {
		var h int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := procStatus(pid, "VmHWM"); v > h {
				h = v
			}
			select {
			case <-stop:
				hwm <- h
				return
			case <-tick.C:
			}
		}
	}()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		check(err)
		break
	}
	wall := time.Since(t0)
	self, below := zombieCPU(pid)
	close(stop)
	check(<-read)
	err := cmd.Wait()
	if err != nil {
		log.Fatalf("bir-proxy verify %s: %v", cassette, err)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	s := verifySample{wall: wall, self: self, below: below, hwm: <-hwm, same: gjson.GetBytes(last, "summary.counts.same").Int()}
	if ru != nil {
		s.maxrss = ru.Maxrss << 10
	}
	if s.same != int64(calls) {
		log.Fatalf("bir-proxy verify %s: %d calls the same, want %d (%s)", cassette, s.same, calls, bytes.TrimSpace(last))
	}
	return s
}

// zombieCPU is an exited, unreaped process's own CPU time and its waited-for
// descendants', from /proc/PID/stat.
func zombieCPU(pid int) (self, below time.Duration) {
	data := must(os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)))
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	tick := func(i int) time.Duration {
		v, _ := strconv.ParseInt(fields[i], 10, 64)
		return time.Duration(v) * time.Second / 100 // USER_HZ
	}
	return tick(11) + tick(12), tick(13) + tick(14)
}

// relayRound is n sequential calls of a variant after a warm-up, with its own CPU
// and its descendants' (the server, under a proxy) over the n calls alone.
func relayRound(v variant, n int) relaySample {
	p := start(v)
	initialize(p)
	for j := range max(n/10, 100) {
		p.roundTrip(call(j))
	}
	pid := p.cmd.Process.Pid
	self0, below0 := cpuTime(pid), descendantsCPU(pid)
	lat := make([]time.Duration, 0, n)
	var sum time.Duration
	for j := range n {
		msg := call(n + j)
		t0 := time.Now()
		p.roundTrip(msg)
		d := time.Since(t0)
		lat = append(lat, d)
		sum += d
	}
	self1, below1 := cpuTime(pid), descendantsCPU(pid)
	p.stop()
	slices.Sort(lat)
	return relaySample{p50: lat[len(lat)/2], mean: sum / time.Duration(n),
		self: (self1 - self0) / time.Duration(n), below: (below1 - below0) / time.Duration(n)}
}

// descendantsCPU is the CPU time of pid's running descendants (their own).
func descendantsCPU(pid int) time.Duration {
	var total time.Duration
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			data, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				c, err := strconv.Atoi(f)
				if err != nil {
					continue
				}
				total += cpuTime(c)
				queue = append(queue, c)
			}
		}
	}
	return total
}
