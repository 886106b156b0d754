// Command bir-bench measures what bir-proxy costs a host, as ratios against the same
// workload in the same run: talking to the fixture server directly, and through a
// minimal byte-copy relay (the floor for any wrapper process, which must wake a third
// process on every message). Wall-clock figures on a shared 2-core machine are noise;
// the ratios are the result.
//
//	go run ./cmd/bir-bench                      # all workloads, default sizes
//	taskset -c 0 go run ./cmd/bir-bench         # pinned to one CPU
//	go run ./cmd/bir-bench -only seq -n 20000   # one workload, more samples
//	go run ./cmd/bir-bench -only http           # bir-proxy --url against a minimal HTTP bridge
//	go run ./cmd/bir-bench -only verify         # bir-proxy verify's cost per call against the relay's
//	go run ./cmd/bir-bench -only seq,pipe,result,start -also OLD-BINARY
//	                                            # issue 26's table, before (OLD-BINARY) and after, in one run
//
// It builds bir-proxy and the fixture servers itself (go build), so run it from the
// module root.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/framing"
	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "copy-relay" {
		os.Exit(copyRelay(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "recorder" {
		os.Exit(recorderMain(os.Args[2:]))
	}
	if len(os.Args) > 2 && os.Args[1] == "http-bridge" {
		os.Exit(httpBridge(os.Args[2:]))
	}
	var (
		n        = flag.Int("n", 5000, "sequential round trips per variant")
		pipeN    = flag.Int("pipe-n", 50000, "messages in the pipelined workload")
		bigMB    = flag.Int("big-mb", 64, "size of the large message, MiB")
		resultMB = flag.String("result-mb", "1,16,64", "with the result workload: the sizes of the tools/call results, MiB, comma-separated")
		argsMB   = flag.String("args-mb", "1,16,64", "with the args workload: the sizes of the tools/call arguments, MiB, comma-separated")
		resRnds  = flag.Int("result-rounds", 3, "rounds of the result workload (a fresh process per variant, size and round)")
		starts   = flag.Int("starts", 30, "process starts per variant for the startup workload")
		only     = flag.String("only", "", "comma-separated workloads: seq,replay-paced,pipe,big,result,args,start,idle,http,burst,verify (default all but burst and verify); http is http-seq,http-pipe,http-big")
		burstN   = flag.Int("burst-n", 100000, "calls in the burst workload (with -recording)")
		verifyN  = flag.Int("verify-n", 10000, "calls in the verify workload's cassette (its memory is also measured with 10x as many)")
		vRounds  = flag.Int("verify-rounds", 5, "rounds of the verify workload")
		vAlso    = flag.String("verify-also", "", "with -only verify: also measure this bir-proxy binary's verify in the same rounds (a before/after comparison in one run)")
		blocking = flag.Bool("blocking", false, "also measure the proxy with host stdio forced blocking and forced non-blocking (BIR_BLOCKING_STDIO=1, =0)")
		rec      = flag.Bool("recording", false, "also measure the proxy recording to a reference recorder (and its faults), and writing the journal")
		jrnl     = flag.Bool("journal", false, "also measure the proxy writing the journal (no recorder): -recording's journal variant alone, against the pipe in the same rounds")
		recHere  = flag.Bool("recorder-in-process", false, "with -recording: run the reference recorders in this process (as before 2026-12), not each in a process of its own")
		profile  = flag.String("profile", "", "write a CPU profile of the named variant's proxy to bench-<variant>.prof, its allocations to bench-<variant>.mem.prof (verify: of one more bir-proxy verify run)")
		selfProf = flag.String("self-profile", "", "write a CPU profile of this process (the host's side and the reference recorders) during the named variant's first pipelined round to bench-self-<variant>.prof")
		gap      = flag.Duration("gap", 0, "pause between sequential round trips (a host that is not saturating the machine)")
		alsoBin  = flag.String("also", "", "also measure this bir-proxy binary (comma-separated: several, as also:, also2:, ...) (BIR_OFF=1, the journal and, with -recording, the plain and batch recorders, each with a recorder of its own) as also:<variant>, in the same rounds: a before/after comparison in one run")
		extraEnv = flag.String("variant-env", "", "also measure the proxy with these extra environment variables (comma-separated K=V)")
		replayOn = flag.Bool("replay", false, "also measure host calls while replay dispatches run on the same upstream (vs none, both recording), and idle wake-ups with a recorder")
		every    = flag.Duration("dispatch-every", 2*time.Millisecond, "with -replay: one dispatch per this interval while the replay variant is measured")
		idleRec  = flag.Duration("idle-replay", 30*time.Second, "with -replay: how long to watch an idle proxy with a recorder for wake-ups")
		rgap     = flag.Duration("replay-gap", 5*time.Millisecond, "with -replay: also compare the replay variants with this pause between host calls (0: not)")
		httpAlso = flag.String("http-also", "", "with -only http: also measure this bir-proxy binary as bir-proxy/also (a before/after comparison in one run)")
		otlp     = flag.Bool("otlp", false, "also measure the proxy with OpenTelemetry tracing on, against a collector that takes everything, one that is down, one answering 503 with Retry-After and one that never answers")
		mcpRem   = flag.String("mcp-remote", "", "with -only http: also measure mcp-remote (npm): a version to install with npm into the user cache directory (e.g. 0.15.1), or the path of its dist/proxy.js")
	)
	flag.Parse()
	log.SetFlags(0)

	dir, err := os.MkdirTemp("", "bir-bench-")
	if err != nil {
		log.Fatal(err)
	}
	if os.Getenv("BIR_BENCH_KEEP") == "" {
		defer os.RemoveAll(dir)
	} else {
		// perf (perf record -a -g) reads the symbols of the binaries after the run.
		log.Printf("bir-bench: BIR_BENCH_KEEP is set; the binaries and state are kept in %s", dir)
	}
	bins := build(dir)

	want := func(w string) bool {
		return *only == "" && w != "burst" && w != "verify" || slices.Contains(strings.Split(*only, ","), w)
	}
	server := []string{bins["rawserver"], "--reply"}

	variants := []variant{
		{name: "direct", argv: server},
		{name: "copy-relay", argv: append([]string{bins["bench"], "copy-relay", "--"}, server...)},
		{name: "bir-proxy", argv: append([]string{bins["bir-proxy"], "--server", "bench", "--"}, server...), env: []string{"BIR_OFF=1"}},
	}
	if *blocking {
		variants = append(variants,
			variant{name: "bir-proxy/blocking", argv: variants[2].argv, env: []string{"BIR_OFF=1", "BIR_BLOCKING_STDIO=1"}},
			variant{name: "bir-proxy/poller", argv: variants[2].argv, env: []string{"BIR_OFF=1", "BIR_BLOCKING_STDIO=0"}})
	}
	if *rec || *jrnl {
		variants = append(variants, variant{name: "bir-proxy/journal", argv: variants[2].argv, env: []string{"BIR_OFF=0", "BIR_RECORDER_URL=", "BIR_RECORDER_TOKEN="}, stateRoot: dir})
	}
	if *rec {
		recs := recordingVariants(dir, bins["bench"], *recHere)
		defer func() {
			for _, v := range recs {
				if ext, ok := v.recorder.(*extRecorder); ok {
					ext.close()
				}
			}
		}()
		for _, v := range recs {
			v.argv = variants[2].argv
			variants = append(variants, v)
		}
	}
	if *replayOn {
		for _, v := range replayVariants(dir, *every) {
			v.argv = variants[2].argv
			variants = append(variants, v)
		}
	}
	for k, bin := range alsoBins(*alsoBin) {
		for _, v := range slices.Clone(variants) {
			if v.name != "bir-proxy" && v.name != "bir-proxy/journal" && v.name != "bir-proxy/recording" && v.name != "bir-proxy/recording/recorder-batch" {
				continue
			}
			a := v
			a.name = alsoName(k) + v.name
			a.argv = append([]string{bin}, v.argv[1:]...)
			if v.recorder != nil {
				fault, _ := strings.CutPrefix(v.name, "bir-proxy/recording/recorder-")
				if v.name == "bir-proxy/recording" {
					fault = ""
				}
				ext := startRecorder(bins["bench"], fault)
				defer ext.close()
				a.recorder, a.env, a.reportLag = ext, append(slices.Clone(ext.env), "BIR_OFF=0"), new([2]time.Duration)
			}
			variants = append(variants, a)
		}
	}
	var otlpCols []*otlpCollector
	if *otlp {
		var vs []variant
		vs, otlpCols = otlpVariants(variants[2].argv, dir)
		defer func() {
			for _, c := range otlpCols {
				c.close()
			}
		}()
		variants = append(variants, vs...)
	}
	if *extraEnv != "" {
		variants = append(variants, variant{name: "bir-proxy/" + *extraEnv, argv: variants[2].argv, env: append([]string{"BIR_OFF=1"}, strings.Split(*extraEnv, ",")...)})
	}
	for i, v := range variants {
		if v.name == *profile {
			base := filepath.Join(must(os.Getwd()), "bench-"+strings.ReplaceAll(v.name, "/", "_"))
			variants[i].env = append(slices.Clone(v.env), "BIR_CPUPROFILE="+base+".prof", "BIR_MEMPROFILE="+base+".mem.prof")
		}
	}
	fmt.Printf("bir-proxy bench: GOMAXPROCS-visible CPUs %d, %s\n\n", cpus(), time.Now().Format(time.RFC3339))
	var table issueTable
	defer table.print(variants)

	if want("seq") {
		fmt.Printf("Sequential tools/call round trips (%d each, interleaved in rounds):\n", *n)
		res := sequentialRounds(variants, *n, 10, *gap)
		table.seq = res
		for _, v := range variants {
			fmt.Printf("  %-24s p50 %8s  p99 %8s  proxy CPU/call %8s\n", v.name, res[v.name][0], res[v.name][1], res[v.name][2])
		}
		base := res["copy-relay"]
		for _, v := range variants[2:] {
			r := res[v.name]
			fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  the copy relay   (p50 %.2fx direct)\n", v.name, ratio(r[0], base[0]), ratio(r[1], base[1]), ratio(r[0], res["direct"][0]))
		}
		for _, v := range variants {
			if v.stateRoot != "" {
				fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  CPU/call %.2fx  the proxy with BIR_OFF=1\n", v.name, ratio(res[v.name][0], res["bir-proxy"][0]), ratio(res[v.name][1], res["bir-proxy"][1]), ratio(res[v.name][2], res["bir-proxy"][2]))
			}
		}
		for _, v := range variants {
			if v.recorder != nil && v.fault == "" && v.feed == nil {
				fmt.Printf("  %-24s report at the recorder %s after the host had the answer (p50; p99 %s)\n", v.name, v.reportLag[0], v.reportLag[1])
			}
		}
		for _, v := range variants {
			if b, ok := alsoBase(v.name); ok {
				fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  CPU/call %.2fx  %s\n", v.name, ratio(res[v.name][0], res[b][0]), ratio(res[v.name][1], res[b][1]), ratio(res[v.name][2], res[b][2]), b)
			}
		}
		printOTLP(variants, res, otlpCols)
		if r, base := res["bir-proxy/replay-2ms"], res["bir-proxy/replay-none"]; r[0] > 0 && base[0] > 0 {
			fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  the same proxy with no dispatches\n", "bir-proxy/replay-2ms", ratio(r[0], base[0]), ratio(r[1], base[1]))
			for _, v := range variants {
				if v.feed != nil {
					fmt.Printf("  %-24s %d dispatches queued, %d posted ok while measured (%s)\n", v.name, v.feed.queued, v.feed.ok(), v.feed.lag())
				}
			}
		}
		fmt.Println()
	}
	if *replayOn && *rgap > 0 && want("replay-paced") {
		// Fresh recorders: the reports of the runs above must not count here.
		rv := replayVariants(dir, *every)
		for i := range rv {
			rv[i].argv = variants[2].argv
		}
		m := max(*n/3, 100)
		fmt.Printf("Sequential tools/call, %s apart (a host at an agent's pace), %d each, with and without dispatches:\n", *rgap, m)
		res := sequentialRounds(rv, m, 10, *rgap)
		for _, v := range rv {
			fmt.Printf("  %-24s p50 %8s  p99 %8s\n", v.name, res[v.name][0], res[v.name][1])
		}
		r, base := res["bir-proxy/replay-2ms"], res["bir-proxy/replay-none"]
		fmt.Printf("  %-24s p50 %.2fx  p99 %.2fx  the same proxy with no dispatches\n\n", "bir-proxy/replay-2ms", ratio(r[0], base[0]), ratio(r[1], base[1]))
	}
	if want("pipe") {
		fmt.Printf("Pipelined tools/call, 32 in flight (%d messages, interleaved in rounds):\n", *pipeN)
		res := map[string]float64{}
		cpu := map[string]time.Duration{}
		posts := map[string]int{}
		self := map[string]time.Duration{}   // this process: the host's side (and an in-process recorder)
		recCPU := map[string]time.Duration{} // the variant's recorder's process
		sys := map[string][3]int64{}         // the variant's process's read and write syscalls, context switches
		const rounds = 6                     // even: each variant as often early in a round as late (roundOrder)
		for r := range rounds {
			for _, i := range roundOrder(len(variants), r) {
				v := variants[i]
				stopProf := func() {}
				if v.name == *selfProf {
					*selfProf = "" // the first round only: a profile cannot be resumed
					stopProf = startSelfProfile("bench-self-" + strings.ReplaceAll(v.name, "/", "_") + ".prof")
				}
				posts0 := stepPosts(v.recorder)
				self0, rec0 := cpuTime(os.Getpid()), recorderCPU(v.recorder)
				r, c, sc := pipelinedSys(v, *pipeN/rounds, 32)
				sys[v.name] = [3]int64{sys[v.name][0] + sc[0], sys[v.name][1] + sc[1], sys[v.name][2] + sc[2]}
				self[v.name] += (cpuTime(os.Getpid()) - self0) / (rounds * time.Duration(*pipeN/rounds))
				recCPU[v.name] += (recorderCPU(v.recorder) - rec0) / (rounds * time.Duration(*pipeN/rounds))
				stopProf()
				posts[v.name] += stepPosts(v.recorder) - posts0
				res[v.name] += r / rounds
				cpu[v.name] += c / (rounds * time.Duration(*pipeN/rounds))
			}
		}
		table.pipe = res
		for _, v := range variants {
			per := float64(rounds * (*pipeN / rounds))
			fmt.Printf("  %-24s %10.0f msg/s  proxy CPU/call %8s  host %8s  recorder %8s  syscalls/call %.2f read %.2f write  switches/call %.2f\n", v.name, res[v.name], cpu[v.name], self[v.name], recCPU[v.name], float64(sys[v.name][0])/per, float64(sys[v.name][1])/per, float64(sys[v.name][2])/per)
		}
		for _, v := range variants[2:] {
			fmt.Printf("  %-24s %.2fx the copy relay's throughput\n", v.name, res[v.name]/res["copy-relay"])
		}
		for _, v := range variants[3:] {
			fmt.Printf("  %-24s %.2fx throughput  CPU/call %.2fx  the proxy with BIR_OFF=1\n", v.name, res[v.name]/res["bir-proxy"], ratio(cpu[v.name], cpu["bir-proxy"]))
		}
		for _, v := range variants {
			if v.recorder != nil && v.fault == "" && posts[v.name] > 0 {
				fmt.Printf("  %-24s %d step POSTs, %.1f reports each\n", v.name, posts[v.name], float64(*pipeN)/float64(posts[v.name]))
			}
		}
		for _, v := range variants {
			if b, ok := alsoBase(v.name); ok {
				fmt.Printf("  %-24s %.2fx throughput  CPU/call %.2fx  %s\n", v.name, res[v.name]/res[b], ratio(cpu[v.name], cpu[b]), b)
			}
		}
		fmt.Println()
	}
	if want("burst") {
		fmt.Printf("A burst of %d pipelined calls, 32 in flight: are all reports complete?\n", *burstN)
		for _, v := range variants {
			if v.stateRoot == "" || v.fault != "" {
				continue
			}
			complete, total, d := burst(v, *burstN)
			fmt.Printf("  %-34s %d of %d reports complete (arguments and result), all in %s\n", v.name, complete, total, d.Round(time.Millisecond))
		}
		fmt.Println()
	}
	if want("verify") {
		verifyWorkload(bins, dir, *verifyN, *vRounds, *profile, *vAlso)
	}
	if want("big") {
		fmt.Printf("One %d MiB tools/call echoed back (server --echo):\n", *bigMB)
		res := map[string]time.Duration{}
		for _, v := range variants {
			ev := v
			ev.argv = slices.Clone(v.argv)
			// The echo server, not --reply: the message crosses the proxy both ways.
			ev.argv[len(ev.argv)-1] = "--echo"
			d, hwm := big(ev, *bigMB<<20)
			res[v.name] = d
			extra := ""
			if hwm > 0 {
				extra = fmt.Sprintf("  peak RSS %d MiB (%.2fx the message)", hwm>>20, float64(hwm)/float64(*bigMB<<20))
			}
			fmt.Printf("  %-24s %8s%s\n", v.name, d.Round(time.Millisecond), extra)
		}
		for _, v := range variants[1:] {
			fmt.Printf("  %-24s %.2fx direct\n", v.name, ratio(res[v.name], res["direct"]))
		}
		fmt.Println()
	}
	if want("result") {
		sizes := parseSizes(*resultMB)
		fmt.Printf("A tools/call whose result is %s MiB (server --reply-size; %d rounds, a fresh process each):\n", *resultMB, *resRnds)
		table.result, table.sizesMB = resultWorkload(variants, sizes, *resRnds), sizes
		printResults(variants, table.result, sizes)
		fmt.Println()
	}
	if want("args") {
		sizes := parseSizes(*argsMB)
		fmt.Printf("A tools/call whose arguments are %s MiB, answered small (%d rounds, a fresh process each):\n", *argsMB, *resRnds)
		table.args, table.argsMB = sizeWorkload(variants, sizes, *resRnds, argsCalls), sizes
		printSized(variants, table.args, sizes, "arguments")
		fmt.Println()
	}
	if want("start") {
		fmt.Printf("Startup to the initialize answer (median of %d):\n", *starts)
		res := startupRounds(variants, *starts)
		for _, v := range variants {
			fmt.Printf("  %-24s %8s\n", v.name, res[v.name].Round(10*time.Microsecond))
		}
		table.start = res
		for _, v := range variants[2:] {
			fmt.Printf("  %-24s +%s over the copy relay\n", v.name, (res[v.name] - res["copy-relay"]).Round(10*time.Microsecond))
		}
		fmt.Println()
	}
	if parts := httpParts(want); len(parts) > 0 {
		httpWorkloads(bins, parts, *n, *pipeN, *bigMB, *gap, *profile, *mcpRem, *httpAlso)
	}
	if want("idle") {
		fmt.Println("Idle for 3 s after one call:")
		for _, v := range variants[2:] {
			cpu, rss, wakes := idle(v, 3*time.Second)
			fmt.Printf("  %-24s CPU %s  RSS %.1f MiB  wake-ups %.1f/s\n", v.name, cpu, float64(rss)/(1<<20), wakes)
		}
		if *replayOn {
			fmt.Printf("\nIdle for %s with a healthy recorder (polls held %s), wake-ups:\n", *idleRec, "25s")
			withRec := replayVariants(dir, 0)[0]
			withRec.argv = variants[2].argv
			for _, v := range []variant{variants[2], withRec} {
				w := idleWakeups(v, *idleRec)
				fmt.Printf("  %-24s %s\n", v.name, w)
			}
		}
	}
}

type variant struct {
	name string
	argv []string
	env  []string

	// recorder is the reference recorder a recording variant reports to; fault is
	// what it is made to do wrong ("" for nothing). rec is the same recorder when it
	// runs in this process (a replay variant queues dispatches there).
	recorder  benchRecorder
	rec       *recordertest.Server
	fault     string
	stateRoot string
	// reportLag is filled by the sequential workload: how long after the host read an
	// answer the recorder had the call's report (p50, p99).
	reportLag *[2]time.Duration
	// feed, for a replay variant, queues dispatches at rec while it is measured.
	feed *feeder
	// seqRSS, when set, gets the process's peak RSS after the sequential workload.
	seqRSS *int64
	// quiet sends the process's stderr nowhere (a peer that logs every message).
	quiet bool
}

// proc is one running variant: the host's ends of its pipes.
type proc struct {
	cmd   *exec.Cmd
	state string // its XDG_STATE_HOME, for a variant that records
	in    *framing.Writer
	inF   *os.File
	out   *framing.Reader
}

func start(v variant) *proc {
	cmd := exec.Command(v.argv[0], v.argv[1:]...)
	cmd.Env = append(os.Environ(), v.env...)
	state := ""
	if v.stateRoot != "" {
		// A fresh state directory per run: a later run would otherwise spend its
		// time adopting the reports an earlier run left for a failing recorder.
		state = must(os.MkdirTemp(v.stateRoot, "state-"))
		cmd.Env = append(cmd.Env, "XDG_STATE_HOME="+state)
	}
	cmd.Stderr = os.Stderr
	if v.quiet {
		cmd.Stderr = nil
	}
	inR, inW, err := os.Pipe()
	check(err)
	outR, outW, err := os.Pipe()
	check(err)
	cmd.Stdin, cmd.Stdout = inR, outW
	check(cmd.Start())
	inR.Close()
	outW.Close()
	return &proc{cmd: cmd, state: state, in: framing.NewWriter(inW), inF: inW, out: framing.NewReader(outR)}
}

// stop ends the variant and returns the CPU time its process used in all.
func (p *proc) stop() time.Duration {
	p.inF.Close()
	_ = p.cmd.Wait()
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

func (p *proc) roundTrip(msg []byte) []byte {
	check(p.in.Write(msg))
	resp, err := p.out.Read()
	check(err)
	return resp
}

func call(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","_bir_call_id":"c-` + strconv.Itoa(id) + `"}}}`)
}

func initialize(p *proc) {
	p.roundTrip([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	check(p.in.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
}

// sequentialRounds measures every variant in turn, rounds times, so that the machine's
// noise (other tenants, frequency changes) falls on all of them alike.
func sequentialRounds(vs []variant, n, rounds int, gap time.Duration) map[string][3]time.Duration {
	procs := make([]*proc, len(vs))
	for i, v := range vs {
		procs[i] = start(v)
		initialize(procs[i])
		for j := 0; j < n/10; j++ { // warm up: page faults, first GC, branch predictors
			procs[i].roundTrip(call(j))
		}
	}
	for i, v := range vs {
		if v.feed != nil {
			v.feed.proxyID = proxyIDOf(v.rec, procs[i])
		}
	}
	cpu0 := make([]time.Duration, len(vs))
	for i, p := range procs {
		cpu0[i] = cpuTime(p.cmd.Process.Pid)
	}
	lat := make([][]time.Duration, len(vs))
	answered := make([]map[string]time.Time, len(vs)) // callId → when the host had the answer
	for r := range rounds {
		for _, i := range roundOrder(len(procs), r) {
			p := procs[i]
			stopFeed := vs[i].feed.start()
			for j := range n / rounds {
				id := n + r*n + j // past the warm-up's ids
				msg := call(id)
				t0 := time.Now()
				p.roundTrip(msg)
				t1 := time.Now()
				lat[i] = append(lat[i], t1.Sub(t0))
				if gap > 0 {
					time.Sleep(gap)
				}
				if vs[i].recorder != nil {
					if answered[i] == nil {
						answered[i] = map[string]time.Time{}
					}
					answered[i]["c-"+strconv.Itoa(id)] = t1
				}
			}
			stopFeed()
		}
	}
	for i, v := range vs {
		if v.recorder != nil && v.fault == "" && v.feed == nil {
			*v.reportLag = reportLag(v.recorder, answered[i])
		}
	}
	for _, v := range vs {
		v.feed.settle()
	}
	res := map[string][3]time.Duration{}
	for i, v := range vs {
		if v.seqRSS != nil {
			*v.seqRSS = procStatus(procs[i].cmd.Process.Pid, "VmHWM")
		}
		cpu := procs[i].stop() - cpu0[i]
		l := lat[i]
		slices.Sort(l)
		res[v.name] = [3]time.Duration{l[len(l)/2], l[len(l)*99/100], cpu / time.Duration(len(l))}
	}
	return res
}

// reportLag waits for every call's report and returns how long after the host had
// the answer the recorder had the report: p50 and p99.
func reportLag(rec benchRecorder, answered map[string]time.Time) [2]time.Duration {
	deadline := time.Now().Add(time.Minute)
	for {
		v := rec.view(0)
		var lags []time.Duration
		for _, st := range v.Steps {
			if t, ok := answered[st.CallID]; ok {
				lags = append(lags, st.At.Sub(t))
			}
		}
		if len(lags) == len(answered) {
			slices.Sort(lags)
			return [2]time.Duration{lags[len(lags)/2], lags[len(lags)*99/100]}
		}
		if time.Now().After(deadline) {
			log.Fatalf("reports did not all arrive: %d of %d", len(lags), len(answered))
		}
		time.Sleep(20 * time.Millisecond) // not measured: the host's calls are over
	}
}

// recordingVariants are the proxy recording to a reference recorder on loopback:
// healthy, agreeing to batches, answering 500 to everything, and taking a second per
// request. Each recorder runs in a bir-bench process of its own (bench), or in this one.
func recordingVariants(dir, bench string, here bool) []variant {
	var vs []variant
	for _, fault := range []string{"", "batch", "500", "slow"} {
		var r benchRecorder
		var env []string
		if here {
			rec, err := recordertest.Listen()
			check(err)
			withFault(rec, fault)
			r, env = localRecorder{rec}, rec.Env()
		} else {
			ext := startRecorder(bench, fault)
			r, env = ext, ext.env
		}
		name := "bir-proxy/recording"
		if fault != "" {
			name += "/recorder-" + fault
		}
		if fault == "batch" {
			fault = "" // healthy: its reports are waited for like the plain one's
		}
		vs = append(vs, variant{
			name:      name,
			env:       append(env, "BIR_OFF=0"),
			stateRoot: dir,
			recorder:  r,
			fault:     fault,
			reportLag: new([2]time.Duration),
		})
	}
	return vs
}

// pipelined returns the throughput and the CPU the variant's process used in all
// (including what it did after the last answer: reports still being written or sent).
func pipelined(v variant, n, window int) (float64, time.Duration) {
	rate, cpu, _ := pipelinedSys(v, n, window)
	return rate, cpu
}

// pipelinedSys is pipelined, also returning the read and write syscalls the variant's
// process made in all (/proc/PID/io) and its threads' context switches: a wrapper's
// cost under load is mostly its syscalls and the wake-ups behind them.
func pipelinedSys(v variant, n, window int) (float64, time.Duration, [3]int64) {
	had := 0
	if v.recorder != nil {
		had = v.recorder.view(math.MaxInt).Count
	}
	p := start(v)
	initialize(p)
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = call(i + 1)
	}
	sem := make(chan struct{}, window)
	done := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(done)
		for range n {
			_, err := p.out.Read()
			check(err)
			<-sem
		}
	}()
	for _, m := range msgs {
		sem <- struct{}{}
		check(p.in.Write(m))
	}
	<-done
	rate := float64(n) / time.Since(t0).Seconds()
	if v.recorder != nil && v.fault == "" {
		// Delivery finishes before the process is let go, so its CPU is counted.
		waitSteps(v.recorder, had+n)
	}
	pid := p.cmd.Process.Pid
	sys := [3]int64{procIO(pid, "syscr"), procIO(pid, "syscw"), switches(pid)}
	return rate, p.stop(), sys
}

// procIO is a counter of /proc/PID/io (0 when it cannot be read).
func procIO(pid int, field string) int64 {
	n, _ := strconv.ParseInt(procField(pid, "io", field), 10, 64)
	return n
}

// stepPosts is how many step POSTs rec has answered (0 for no recorder).
func stepPosts(rec benchRecorder) int {
	if rec == nil {
		return 0
	}
	return rec.view(math.MaxInt).Posts
}

// recorderCPU is rec's process's CPU time so far (0 for none, or one in this process).
func recorderCPU(rec benchRecorder) time.Duration {
	if rec == nil {
		return 0
	}
	return rec.cpu()
}

// waitSteps waits until the recorder holds at least n reports.
func waitSteps(rec benchRecorder, n int) {
	deadline := time.Now().Add(2 * time.Minute)
	for rec.view(math.MaxInt).Count < n {
		if time.Now().After(deadline) {
			log.Printf("not every report arrived: %d of %d", rec.view(math.MaxInt).Count, n)
			return
		}
		time.Sleep(5 * time.Millisecond) // not measured: the host's calls are over
	}
}

// burst sends n calls, 32 in flight, and then counts the reports of them that are
// complete: the call's arguments and its result, not "bookkeeping fell behind". d is
// from the first call until every report was in the journal or at the recorder.
func burst(v variant, n int) (complete, total int, d time.Duration) {
	had := 0
	if v.recorder != nil {
		had = v.recorder.view(math.MaxInt).Count
	}
	p := start(v)
	initialize(p)
	t0 := time.Now()
	sem := make(chan struct{}, 32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			_, err := p.out.Read()
			check(err)
			<-sem
		}
	}()
	for i := range n {
		sem <- struct{}{}
		check(p.in.Write(call(1_000_000 + i)))
	}
	<-done
	if v.recorder != nil {
		waitSteps(v.recorder, had+n)
		d = time.Since(t0)
		p.stop()
		for _, st := range v.recorder.view(had).Steps {
			total++
			if st.Complete {
				complete++
			}
		}
		return complete, total, d
	}
	p.stop() // the journal is complete once the proxy has exited
	d = time.Since(t0)
	files, _ := filepath.Glob(filepath.Join(p.state, "bir-proxy", "journal", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		check(err)
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			if gjson.GetBytes(line, "tool").String() != "echo" {
				continue
			}
			total++
			if completeReport(line) {
				complete++
			}
		}
	}
	return complete, total, d
}

func big(v variant, size int) (time.Duration, int64) {
	p := start(v)
	defer p.stop()
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`)
	b.Write(bytes.Repeat([]byte("0123456789abcdef"), size/16))
	b.WriteString(`"}}}`)
	msg := b.Bytes()
	t0 := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { check(p.in.Write(msg)) })
	resp, err := p.out.Read()
	check(err)
	d := time.Since(t0)
	wg.Wait()
	if !bytes.Equal(resp, msg) {
		log.Fatalf("%s: the large message came back changed (%d bytes, want %d)", v.name, len(resp), len(msg))
	}
	var hwm int64
	if v.name != "direct" {
		hwm = procStatus(p.cmd.Process.Pid, "VmHWM")
	}
	return d, hwm
}

// startupRounds measures n starts of every variant, one of each in turn, so that the
// machine's load (other tenants of 2 CPUs) falls on all of them alike; it returns
// each variant's median.
func startupRounds(vs []variant, n int) map[string]time.Duration {
	ds := map[string][]time.Duration{}
	for range n {
		for _, v := range vs {
			t0 := time.Now()
			p := start(v)
			initialize(p)
			ds[v.name] = append(ds[v.name], time.Since(t0))
			p.stop()
		}
	}
	res := map[string]time.Duration{}
	for name, d := range ds {
		slices.Sort(d)
		res[name] = d[len(d)/2]
	}
	return res
}

func idle(v variant, d time.Duration) (time.Duration, int64, float64) {
	p := start(v)
	defer p.stop()
	initialize(p)
	p.roundTrip(call(1))
	pid := p.cmd.Process.Pid
	time.Sleep(500 * time.Millisecond) // let startup work (GC, spool setup) finish
	before, w0 := cpuTime(pid), switches(pid)
	time.Sleep(d)
	return cpuTime(pid) - before, procStatus(pid, "VmRSS"), float64(switches(pid)-w0) / d.Seconds()
}

// copyRelay is the floor: a wrapper process that starts the server and copies bytes
// both ways, understanding nothing.
func copyRelay(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	go func() {
		_, _ = io.Copy(in, os.Stdin)
		in.Close()
	}()
	_, _ = io.Copy(os.Stdout, out)
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

func build(dir string) map[string]string {
	bins := map[string]string{}
	for name, pkg := range map[string]string{
		"bir-proxy": "./cmd/bir-proxy",
		"rawserver": "./testdata/rawserver",
		"rawhttp":   "./testdata/rawhttp",
		"bench":     "./cmd/bir-bench",
	} {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("building %s: %v (run bench from the module root)", pkg, err)
		}
		bins[name] = out
	}
	return bins
}

func procStatus(pid int, field string) int64 {
	kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(procField(pid, "status", field), "kB")), 10, 64)
	return kb << 10
}

// procField is the value of field in /proc/PID/file ("status", "io"), spaces trimmed;
// "" when it cannot be read.
func procField(pid int, file, field string) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// cpuTime is the user+system time a process has used, from /proc/PID/stat.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start after ") ".
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

func cpus() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			n := 0
			for _, part := range strings.Split(strings.TrimSpace(rest), ",") {
				lo, hi, found := strings.Cut(part, "-")
				a, _ := strconv.Atoi(lo)
				b := a
				if found {
					b, _ = strconv.Atoi(hi)
				}
				n += b - a + 1
			}
			return n
		}
	}
	return 0
}

// alsoBins are the binaries of -also, in order.
func alsoBins(flagValue string) []string {
	if flagValue == "" {
		return nil
	}
	return strings.Split(flagValue, ",")
}

// alsoName is the prefix of the variants of the k-th -also binary: "also:", then
// "also2:", "also3:" ...
func alsoName(k int) string {
	if k == 0 {
		return "also:"
	}
	return "also" + strconv.Itoa(k+1) + ":"
}

// alsoBase is the variant an -also variant is the twin of ("also2:bir-proxy" is
// bir-proxy's), ok false for any other variant.
func alsoBase(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "also")
	if !ok {
		return "", false
	}
	digits := strings.TrimLeft(rest, "0123456789")
	return strings.CutPrefix(digits, ":")
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func must[T any](v T, err error) T {
	check(err)
	return v
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// startSelfProfile writes a CPU profile of this process to path until the returned
// function is called.
func startSelfProfile(path string) func() {
	f := must(os.Create(path))
	check(pprof.StartCPUProfile(f))
	return func() {
		pprof.StopCPUProfile()
		check(f.Close())
	}
}

// roundOrder is the order variants take in round r: as listed in even rounds, the
// other way round in odd ones. In a fixed order the variant measured later in a round
// was favoured (4–13% at p50 between two runs of one binary), and the recording
// variants, listed after BIR_OFF=1, always came later.
func roundOrder(n, r int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if r%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}
