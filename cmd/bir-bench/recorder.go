package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/bir-dev/bir-proxy/recorder/recordertest"
)

// benchRecorder is what the workloads read of a variant's recorder.
type benchRecorder interface {
	// view is what the recorder holds: the step reports from the from-th on (none
	// when from is past them all), how many it holds in all, and its step POSTs.
	view(from int) recView
	// cpu is the CPU time the recorder's own process has used (0 for one in this
	// process, whose CPU is this process's).
	cpu() time.Duration
}

type recView struct {
	Steps []recStep `json:"steps"`
	Count int       `json:"count"`
	Posts int       `json:"posts"`
}

type recStep struct {
	CallID   string    `json:"callId"`
	At       time.Time `json:"at"`
	Complete bool      `json:"complete"` // the call's arguments and result, not "bookkeeping fell behind"
}

// localRecorder is a reference recorder in this process (the replay variants queue
// dispatches at theirs).
type localRecorder struct{ *recordertest.Server }

func (r localRecorder) view(from int) recView {
	snap, _ := r.Wait(context.Background(), func(recordertest.Snapshot) bool { return true })
	v := recView{Count: len(snap.Steps)}
	for _, st := range snap.Steps[min(from, len(snap.Steps)):] {
		v.Steps = append(v.Steps, recStep{CallID: st.Get("callId").String(), At: st.At, Complete: completeReport(st.Body)})
	}
	for _, q := range snap.Requests {
		if q.Path == "/proxy/step" {
			v.Posts++
		}
	}
	return v
}

func (localRecorder) cpu() time.Duration { return 0 }

// completeReport says a report has the call's arguments and result, not bookkeeping's
// "fell behind" in their place.
func completeReport(line []byte) bool {
	r := gjson.ParseBytes(line)
	return r.Get("args.text").String() == "hello, world" && r.Get("result").Exists() &&
		!bytes.Contains(line, []byte("fell behind")) && r.Get("callId").String() != ""
}

// extRecorder is a reference recorder in a process of its own, as a real recorder
// is. In this process it shared the Go runtime with the host's side: its bursts of
// handlers held both Ps while the host's reader waited for one, and its heap was the
// host's GC, so the host looked slower for what the proxy did not do.
type extRecorder struct {
	cmd     *exec.Cmd
	stdin   *os.File
	env     []string
	control string
}

// startRecorder starts `bir-bench recorder` with fault ("", "batch", "500", "slow").
func startRecorder(bench, fault string) *extRecorder {
	cmd := exec.Command(bench, "recorder", "-fault", fault)
	inR, inW, err := os.Pipe()
	check(err)
	cmd.Stdin, cmd.Stderr = inR, os.Stderr
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	inR.Close()
	var hello struct {
		Env     []string `json:"env"`
		Control string   `json:"control"`
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	check(err)
	check(json.Unmarshal(line, &hello))
	return &extRecorder{cmd: cmd, stdin: inW, env: hello.Env, control: hello.Control}
}

func (r *extRecorder) view(from int) recView {
	resp, err := http.Get(r.control + "/view?from=" + strconv.Itoa(from))
	check(err)
	defer resp.Body.Close()
	var v recView
	check(json.NewDecoder(resp.Body).Decode(&v))
	return v
}

func (r *extRecorder) cpu() time.Duration { return cpuTime(r.cmd.Process.Pid) }

func (r *extRecorder) close() {
	r.stdin.Close() // it ends when its stdin does
	_ = r.cmd.Wait()
}

// withFault makes rec do what a recording variant's fault says: agree to batches
// ("batch"), answer 500 to everything ("500"), or take a second per request ("slow").
func withFault(rec *recordertest.Server, fault string) {
	switch fault {
	case "batch":
		rec.Batch(true)
	case "500":
		rec.Fail(500)
	case "slow":
		rec.Slow(time.Second)
	}
}

// recorderMain is `bir-bench recorder`: a reference recorder with a fault, and a
// control endpoint for view. It prints {"env", "control"} as its first line and ends
// when its stdin does.
func recorderMain(args []string) int {
	fs := flag.NewFlagSet("recorder", flag.ExitOnError)
	fault := fs.String("fault", "", `"", "batch", "500" or "slow"`)
	fs.Parse(args)
	if path := os.Getenv("BIR_BENCH_RECORDER_PROFILE"); path != "" {
		// A CPU profile of each recorder, to <path>-<fault>.prof: what the recorder's
		// side of a report costs.
		f, err := os.Create(path + "-" + *fault + ".prof")
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	rec, err := recordertest.Listen()
	if err != nil {
		log.Print(err)
		return 1
	}
	defer rec.Close()
	withFault(rec, *fault)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Print(err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/view", func(w http.ResponseWriter, req *http.Request) {
		from, _ := strconv.Atoi(req.URL.Query().Get("from"))
		json.NewEncoder(w).Encode(localRecorder{rec}.view(from)) //nolint:errcheck // the bench went away
	})
	go http.Serve(ln, mux) //nolint:errcheck // ends with the process
	hello, _ := json.Marshal(map[string]any{"env": rec.Env(), "control": "http://" + ln.Addr().String()})
	fmt.Printf("%s\n", hello)
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			return 0
		}
	}
}
