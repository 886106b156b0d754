// Package verify replays recorded tool calls (a cassette, or the journal's calls whose
// arguments lost nothing to redaction) against a server — a new build, an upgraded
// dependency — and says, call by call, what changed, the MCP way (package mcpdiff).
// Only calls that are safe to make again run by default: those of tools the recorded
// and the current tools/list both annotate readOnlyHint: true.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/internal/mcptask"
	"github.com/bir-dev/bir-proxy/internal/regular"
	"github.com/bir-dev/bir-proxy/mcpdiff"
	"github.com/bir-dev/bir-proxy/pins"
	"github.com/bir-dev/bir-proxy/upstream"
)

// WouldRun is a call --plan would run.
const WouldRun mcpdiff.Status = "would_run"

// DefinitionDrift is a tool whose definition changed (its description, title,
// annotations, ..., compared as pins compare them): a finding next to the call's own
// status, never instead of it, so that "description changed" and "the result
// changed" show together. It is counted in Summary.Counts besides that status.
const DefinitionDrift mcpdiff.Status = "definition_drift"

// Source is where the recorded calls come from, read one at a time.
type Source interface {
	Header() *cassette.Header
	Next() (*cassette.Call, error) // io.EOF at the end
	Close() error
}

// Streamed is a Source that can be read once only (a pipe: `verify <(…)`), which
// says so with Streamed() true. Run replays it as it is read, with no check first:
// a second open found the pipe empty, or the rest of it.
type Streamed interface {
	Streamed() bool
}

func streamed(src Source) bool {
	s, ok := src.(Streamed)
	return ok && s.Streamed()
}

// Config is one verify run.
type Config struct {
	// Open opens the recording from its start; it is opened twice: once to replay,
	// once to check all of it first (a bad line stops everything before anything
	// runs) — but once only when the Source is a stream (Streamed: a pipe, read as it
	// comes).
	Open func() (Source, error)
	// Dial starts or connects to the server.
	Dial func(ctx context.Context) (upstream.Conn, error)
	// IDPrefix starts the ids of verify's requests (the replay executor's namespace,
	// "bir:verify:<pid>:").
	IDPrefix string

	Concurrency     int // calls in flight at most (default 1)
	AllowIdempotent bool
	AllowWrites     bool
	Tools           []string // only these (none: all)
	SkipTools       []string
	Plan            bool
	Diff            mcpdiff.Options
	MaxSlowdown     float64       // flag a same answer that took this many times longer (0: never)
	CallTimeout     time.Duration // per call (default DefaultCallTimeout)
	// Redacted: the recorded answers were redacted and clipped as reports are (the
	// journal): the current ones are, before they are compared.
	Redacted bool
	// Update, when set, is the cassette to rewrite with the new answers (accepting them).
	Update string
	Logger *slog.Logger
}

// DefaultCallTimeout bounds one replayed call, as a replay dispatch's default.
const DefaultCallTimeout = 60 * time.Second

// slowFloor: a call is only slower when it takes this much longer too (a 1 ms call
// taking 3 ms is noise).
const slowFloor = 10 * time.Millisecond

// CallResult is what became of one recorded call.
type CallResult struct {
	Seq    int64
	Tool   string
	Status mcpdiff.Status
	Reason string
	Diff   string
	Before time.Duration
	After  time.Duration // 0 when it did not run
	Ran    bool
	// DefinitionDrift lists the members of the tool's definition that changed from
	// the recorded tools/list to the current one (package pins' comparison; the
	// schemas only when schema_drift did not already say them), sorted; nil when none.
	// Such a call is a finding whatever its Status.
	DefinitionDrift []string

	// unverified says, for a call that was neither compared nor a finding, why in
	// words common to every call it befell (the summary of a run that verified
	// nothing groups the calls by it).
	unverified          string
	defDiff             string // the diff of DefinitionDrift's members
	newResult, newError []byte // the new answer, for Update
}

// Why calls go unverified, as the summary of a run that verified nothing says them.
const (
	whyNotReadOnly   = "not annotated readOnlyHint: true in both the recorded and the current tools/list; --allow-idempotent or --allow-writes runs them"
	whyNoRecorded    = "the recording has no tools/list, so nothing says a tool is read-only; --allow-writes runs them"
	whyNotRecorded   = "the recorded tools/list does not have the tool, so nothing says it is read-only; --allow-writes runs them"
	whyUnlisted      = "neither the recorded nor the current tools/list has the tool; --allow-writes runs them"
	whySelection     = "not selected (--tool, --skip-tool)"
	whyNotReplayable = "cannot be made again (arguments redacted, too large when recorded, no answer recorded, or it asked for input)"
)

// Sink receives the results, in the cassette's order, as they come. Start's total is
// -1 for a Streamed source: not known before it is read (the Summary's is).
type Sink interface {
	Start(h *cassette.Header, total int, plan bool)
	Call(r *CallResult)
	Done(s *Summary)
}

// Summary counts the results.
type Summary struct {
	Server   string
	Total    int
	Counts   map[mcpdiff.Status]int
	Findings int
	Elapsed  time.Duration
	Plan     bool
	Updated  string // the cassette rewritten by Update
	// Verified counts the calls compared with their recording (with Plan, those that
	// would run). None verified is no pass (exit 4): a run of nothing but skipped
	// calls said "nothing changed" and exited 0, a green CI that covered nothing.
	Verified int
	// Unverified says why, when Verified is 0: "7 skipped: not annotated …".
	Unverified string
	// Tools is how the server's tools/list differs by name from the recorded one.
	Tools ToolChanges

	unverified map[string]int // by the calls' unverified, in first-seen order (whys)
	whys       []string
}

// Finding says the call is a finding: its status, or its tool's definition drift.
func (r *CallResult) Finding() bool { return r.Status.Finding() || len(r.DefinitionDrift) > 0 }

// count adds a result to the summary.
func (s *Summary) count(res *CallResult) {
	s.Counts[res.Status]++
	if len(res.DefinitionDrift) > 0 {
		s.Counts[DefinitionDrift]++
	}
	if res.Finding() {
		s.Findings++
	}
	switch {
	case res.Status == WouldRun || res.Ran && res.Status != mcpdiff.NotRun:
		s.Verified++
	case res.unverified != "":
		if s.unverified == nil {
			s.unverified = map[string]int{}
		}
		key := string(res.Status) + ": " + res.unverified
		if s.unverified[key] == 0 {
			s.whys = append(s.whys, key)
		}
		s.unverified[key]++
	}
}

// explain sets Unverified when nothing was verified.
func (s *Summary) explain() {
	if s.Verified > 0 {
		return
	}
	if s.Total == 0 {
		s.Unverified = "the recording holds no call"
		return
	}
	var parts []string
	for _, k := range s.whys {
		parts = append(parts, strconv.Itoa(s.unverified[k])+" "+k)
	}
	if len(parts) == 0 {
		parts = append(parts, "no call was compared")
	}
	s.Unverified = strings.Join(parts, "; ")
}

// InputError is a recording that cannot be read (exit 2); UnreachableError a server
// that could not be started or reached (exit 3).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// Run verifies. The error is an *InputError, an *UnreachableError, or a failure to
// update the cassette; findings are in the Summary.
func Run(ctx context.Context, cfg Config, out Sink) (*Summary, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := mcpdiff.Compare(mcpdiff.Answer{}, mcpdiff.Answer{}, cfg.Diff); err != nil {
		return nil, &InputError{err}
	}
	src, err := cfg.Open()
	if err != nil {
		return nil, &InputError{err}
	}
	defer src.Close()
	h := src.Header()
	// total is -1 for a stream: not known before it is read (Sink.Start).
	total := -1
	switch {
	case !streamed(src):
		if total, err = check(cfg.Open); err != nil {
			return nil, &InputError{err}
		}
	case cfg.Update != "" && !cfg.Plan:
		// There is no file to rewrite: cassette.Create would rename the pipe's name.
		return nil, &InputError{fmt.Errorf("--update rewrites the cassette's file; %s is not a regular file (a pipe?)", cfg.Update)}
	}

	start := time.Now()
	conn, err := cfg.Dial(ctx)
	if err != nil {
		return nil, &UnreachableError{fmt.Errorf("starting the server: %w", err)}
	}
	s := newSession(conn, cfg.IDPrefix)
	defer func() {
		conn.Close()
		<-s.done
		s.replies.Wait()
	}()
	hsCtx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	stopWatch := s.watch(hsCtx, "the handshake ran out of time or was interrupted")
	initResult, err := s.handshake(hsCtx, h)
	var tools map[string][]byte
	var toolsRaw []byte
	var toolsCut string
	if err == nil {
		tools, toolsRaw, toolsCut, err = s.listTools(hsCtx)
	}
	stopWatch()
	cancel()
	if err != nil {
		if why := s.gone(); why != "" && !errors.Is(err, context.DeadlineExceeded) {
			err = errors.New(why)
		}
		return nil, &UnreachableError{fmt.Errorf("the handshake with the server: %w", err)}
	}

	if toolsCut != "" {
		cfg.Logger.Warn(toolsCut)
	}
	var up *cassette.Writer
	if cfg.Update != "" && !cfg.Plan {
		if toolsCut != "" {
			return nil, fmt.Errorf("not updating %s: %s", cfg.Update, toolsCut)
		}
		nh := *h
		nh.Tools = toolsRaw
		nh.RecordedAt = time.Now()
		if initResult != nil && h.Era != cassette.EraStateless {
			nh.InitializeResult = initResult
		}
		if up, err = cassette.Create(cassette.WriterOptions{Path: cfg.Update, Logger: cfg.Logger}); err != nil {
			return nil, err
		}
		up.SetHeader(nh)
	}

	defer s.watch(ctx, "verify was interrupted")()
	r := &runner{cfg: &cfg, s: s, h: h, recTools: recordedTools(h), tools: tools, toolsCut: toolsCut}
	sum := &Summary{Server: h.Server, Total: total, Counts: map[mcpdiff.Status]int{}, Plan: cfg.Plan,
		Tools: toolChanges(r.recTools, tools, toolsCut != "")}
	r.renamed = sum.Tools.Close
	out.Start(h, total, cfg.Plan)
	defer flush(out) // what Table and JSON hold, whichever way Run returns

	read := 0 // a stream's total
	emit := func(c *cassette.Call, res *CallResult) {
		read++
		r.noteDefinition(res)
		sum.count(res)
		out.Call(res)
		if up != nil {
			up.Call(r.updated(c, res))
		}
	}
	var readErr error
	if cfg.Concurrency == 1 {
		// One at a time, on this goroutine: a call handed from a reading goroutine to
		// a calling one to an emitting one woke three goroutines per call, and those
		// hand-offs were most of verify's own cost per call.
		for {
			c, err := src.Next()
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				break
			}
			res, run := r.verdict(ctx, c)
			if run {
				res = r.run(ctx, c, res)
			}
			emit(c, res)
		}
	} else {
		readErr = r.concurrently(ctx, src, emit)
	}
	sum.Elapsed = time.Since(start)
	if readErr != nil {
		// A file was checked once already: it changed under us. A stream was not: a
		// bad line stops it there, the calls before it having run.
		return nil, &InputError{readErr}
	}
	if total < 0 {
		sum.Total = read
	}
	if up != nil {
		if err := up.Close(); err != nil {
			return nil, err
		}
		if n := up.Dropped(); n > 0 {
			return nil, fmt.Errorf("updating %s: %s could not be written; the previous cassette is %s", cfg.Update, plural(int(n), "call", "calls"), cassette.Rotated(cfg.Update, 1))
		}
		sum.Updated = cfg.Update
	}
	sum.explain()
	out.Done(sum)
	return sum, nil
}

// concurrently runs the calls at most Concurrency in flight, emitting the results in
// order: each call gets a slot whose result the emitter waits for in turn.
func (r *runner) concurrently(ctx context.Context, src Source, emit func(*cassette.Call, *CallResult)) error {
	type slot struct {
		call *cassette.Call
		res  chan *CallResult
	}
	slots := make(chan slot, r.cfg.Concurrency)
	sem := make(chan struct{}, r.cfg.Concurrency)
	var readErr error
	go func() {
		defer close(slots)
		for {
			c, err := src.Next()
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				return
			}
			sl := slot{call: c, res: make(chan *CallResult, 1)}
			res, run := r.verdict(ctx, c)
			if !run {
				sl.res <- res
				slots <- sl
				continue
			}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				sl.res <- r.run(ctx, c, res)
			}()
			slots <- sl
		}
	}()
	for sl := range slots {
		emit(sl.call, <-sl.res)
	}
	return readErr // read after slots closed
}

// verdict is decide, or not_run once verify is interrupted.
func (r *runner) verdict(ctx context.Context, c *cassette.Call) (*CallResult, bool) {
	if ctx.Err() != nil {
		return &CallResult{Seq: c.Seq, Tool: c.Tool, Status: mcpdiff.NotRun, Reason: "verify was interrupted", Before: c.Duration()}, false
	}
	return r.decide(c)
}

// check reads the whole recording once: a line it cannot read stops verify before
// anything runs. It returns the number of calls.
func check(open func() (Source, error)) (int, error) {
	src, err := open()
	if err != nil {
		return 0, err
	}
	defer src.Close()
	next := func() error { _, err := src.Next(); return err }
	if sk, ok := src.(interface{ Skip() error }); ok {
		next = sk.Skip // as strict, nothing copied
	}
	n := 0
	for {
		err := next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		n++
	}
}

func recordedTools(h *cassette.Header) map[string][]byte {
	if h.Tools == nil {
		return nil
	}
	m := map[string][]byte{}
	jsonlex.EachElement(h.Tools, func(t []byte) { m[jsonlex.StringOf(jsonlex.Get(t, "name"))] = t })
	return m
}

type runner struct {
	drift    map[string]*drift // by tool: its schemas compared once (decide runs on one goroutine)
	cfg      *Config
	s        *session
	h        *cassette.Header
	recTools map[string][]byte // nil: the recording has no tools/list (the journal): nothing is read-only
	tools    map[string][]byte
	toolsCut string            // why the server's tools/list was not read to its end, or ""
	renamed  map[string]string // a removed tool → an added one of a close name
}

// drift is how a tool's definition changed from the recording: its schemas (why and
// diff, "" when they did not: schema_drift), and the other members that changed
// (def, their diff defDiff: definition_drift).
type drift struct {
	why, diff string
	def       []string
	defDiff   string
}

// toolDrift is the tool's drift, worked out once per tool.
func (r *runner) toolDrift(tool string, rec, cur []byte) *drift {
	if d, ok := r.drift[tool]; ok {
		return d
	}
	if r.drift == nil {
		r.drift = map[string]*drift{}
	}
	d := &drift{}
	schemas := false
	if changed, why, diff := mcpdiff.CompareTool(rec, cur); changed {
		d.why, d.diff, schemas = why, diff, true
	}
	// The rest as pins compare it (docs/pins.md): a description that now tells the
	// model something else ran as "same" while the schemas were all verify looked at.
	for _, m := range pins.Changes(rec, cur) {
		if schemas && (m == "inputSchema" || m == "outputSchema") {
			continue // schema_drift says them, with their strict diff
		}
		d.def = append(d.def, m)
	}
	if d.def != nil {
		d.defDiff = mcpdiff.DiffMembers(rec, cur, d.def)
	}
	r.drift[tool] = d
	return d
}

// noteDefinition (on the emitting goroutine: it reads nothing of the runner's) puts a call's definition drift before its own reason and diff:
// "description changed (definition_drift); the result changed".
func (r *runner) noteDefinition(res *CallResult) {
	if len(res.DefinitionDrift) == 0 {
		return
	}
	why := strings.Join(res.DefinitionDrift, " and ") + " changed (" + string(DefinitionDrift) + ")"
	if res.Reason != "" {
		why += "; " + res.Reason
	}
	res.Reason = why
	res.Diff = res.defDiff + res.Diff
}

func hint(tool []byte, name string) string {
	return string(jsonlex.Get(jsonlex.Get(tool, "annotations"), name))
}

// decide says what to do with a call: a verdict now, or run (with res's fields set).
func (r *runner) decide(c *cassette.Call) (res *CallResult, run bool) {
	res = &CallResult{Seq: c.Seq, Tool: c.Tool, Before: c.Duration()}
	verdict := func(s mcpdiff.Status, why string) (*CallResult, bool) {
		res.Status, res.Reason = s, why
		switch s {
		case mcpdiff.NotReplayable:
			res.unverified = whyNotReplayable
		case mcpdiff.Skipped:
			res.unverified = whySelection
		}
		return res, false
	}
	switch {
	case c.TooLarge > 0:
		// Recorded without its arguments and answer: a replay would call it with none
		// and compare with nothing.
		return verdict(mcpdiff.NotReplayable, "it was too large when recorded ("+strconv.FormatInt(c.TooLarge, 10)+
			" bytes of arguments and answer): the cassette kept neither, so there is nothing to replay or compare")
	case c.Redacted:
		why := "its arguments were recorded redacted"
		if len(c.RedactedKeys) > 0 {
			why += " (" + joinKeys(c.RedactedKeys) + ")"
		}
		return verdict(mcpdiff.NotReplayable, why)
	case c.Outcome == "task_unfinished":
		// The recording ended before its task did: there is no final answer to
		// compare a replay's with (docs/recording.md).
		return verdict(mcpdiff.NotReplayable, "its task had not ended when the recording did (task_unfinished): no final result was recorded")
	case c.Result == nil && c.Error == nil:
		return verdict(mcpdiff.NotReplayable, "the recorded call got no answer ("+c.Outcome+")")
	case c.Outcome == "input_required":
		return verdict(mcpdiff.NotReplayable, "it asked the host for input (input_required)")
	case len(r.cfg.Tools) > 0 && !slices.Contains(r.cfg.Tools, c.Tool):
		return verdict(mcpdiff.Skipped, "not selected (--tool)")
	case slices.Contains(r.cfg.SkipTools, c.Tool):
		return verdict(mcpdiff.Skipped, "--skip-tool")
	}
	cur, listed := r.tools[c.Tool]
	// A recording without a tools/list (the journal; a host that never asked) does not
	// say a tool is read-only: the current server's word alone, a lying one's, ran a
	// wipe {"all":true}. Recorded and current: unlisted in it, not read-only.
	rec, recListed := r.recTools[c.Tool]
	switch {
	case !listed && r.toolsCut != "" && recListed:
		// Not among the tools read: perhaps on a page past the cut, perhaps gone.
		return verdict(mcpdiff.NotRun, strconv.Quote(c.Tool)+" is not among the tools read: "+r.toolsCut)
	case !listed && recListed:
		why := "the server no longer lists " + strconv.Quote(c.Tool)
		if to, ok := r.renamed[c.Tool]; ok {
			why += " (did you mean " + strconv.Quote(to) + "?)"
		}
		return verdict(mcpdiff.MissingTool, why)
	case !listed && !r.cfg.AllowWrites:
		// Called without being listed (a host's guess, a tool gone before the
		// recording): nothing says it is safe, nor that it went missing.
		verdict(mcpdiff.Skipped, "neither the recorded nor the current tools/list has it (--allow-writes)")
		res.unverified = whyUnlisted
		return res, false
	}
	if !r.cfg.AllowWrites {
		readOnly := recListed && hint(rec, "readOnlyHint") == "true" && hint(cur, "readOnlyHint") == "true"
		idem := r.cfg.AllowIdempotent && recListed &&
			hint(rec, "idempotentHint") == "true" && hint(cur, "idempotentHint") == "true" &&
			hint(rec, "destructiveHint") == "false" && hint(cur, "destructiveHint") == "false"
		if !readOnly && !idem {
			why, unverified := "not annotated readOnlyHint: true in both the recorded and the current tools/list (--allow-idempotent, --allow-writes)", whyNotReadOnly
			switch {
			case r.recTools == nil:
				why, unverified = "the recording does not list it (it has no tools/list), so nothing says it is read-only (--allow-writes)", whyNoRecorded
			case !recListed:
				why, unverified = "the recording does not list it, so nothing says it is read-only (--allow-writes)", whyNotRecorded
			}
			verdict(mcpdiff.Skipped, why)
			res.unverified = unverified
			return res, false
		}
	}
	if recListed {
		d := r.toolDrift(c.Tool, rec, cur)
		if d.why != "" {
			res.Status, res.Reason, res.Diff = mcpdiff.SchemaDrift, d.why, d.diff
		}
		res.DefinitionDrift, res.defDiff = d.def, d.defDiff
	}
	if r.cfg.Plan {
		if res.Status == "" {
			res.Status, res.Reason = WouldRun, runReason(r.cfg, rec, cur)
		} else {
			res.Reason += "; would run"
		}
		return res, false
	}
	return res, true
}

func runReason(cfg *Config, rec, cur []byte) string {
	switch {
	case hint(rec, "readOnlyHint") == "true" && hint(cur, "readOnlyHint") == "true":
		return "read-only"
	case cfg.AllowWrites:
		return "--allow-writes"
	default:
		return "idempotent and not destructive (--allow-idempotent)"
	}
}

func joinKeys(ks []string) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += k
	}
	return s
}

// run makes the call again and compares.
func (r *runner) run(ctx context.Context, c *cassette.Call, res *CallResult) *CallResult {
	if why := r.s.gone(); why != "" {
		res.Status, res.Reason = mcpdiff.NotRun, "not run: "+why
		return res
	}
	params := append([]byte(`{"name":`), jsonlex.AppendString(nil, c.Tool)...)
	if c.Arguments != nil {
		params = append(append(params, `,"arguments":`...), c.Arguments...)
	}
	params = append(params, '}')
	t0 := time.Now()
	a, err := r.s.request(ctx, r.cfg.CallTimeout, "tools/call", params)
	if err == nil && a.err == nil {
		if t, ok, bad := mcptask.Handle(a.result); ok {
			// A task: its final answer is what was recorded (docs/verify.md, "Tasks").
			if bad != "" {
				err = &errLost{"the server answered with a task handle that " + bad}
			} else {
				a, err = r.follow(ctx, t0.Add(r.cfg.CallTimeout), &t)
			}
		}
	}
	took := time.Since(t0)
	res.Ran = true
	if err != nil {
		res.Status = mcpdiff.NotRun
		var te *errTaskExpired
		switch {
		case errors.As(err, &te):
			res.Reason = te.why
		case errors.Is(err, errExpired):
			res.Reason = "no answer within " + r.cfg.CallTimeout.String()
		case ctx.Err() != nil:
			res.Reason = "verify was interrupted"
		default:
			res.Reason = err.Error()
		}
		return res
	}
	res.After = took
	if r.cfg.Redacted {
		a = redactAnswer(a)
	}
	cmp, _ := mcpdiff.Compare(mcpdiff.Answer{Result: c.Result, Error: c.Error}, mcpdiff.Answer{Result: a.result, Error: a.err}, r.cfg.Diff)
	res.newResult, res.newError = a.result, a.err
	if res.Status == mcpdiff.SchemaDrift {
		if cmp.Status != mcpdiff.Same {
			res.Reason += "; and " + cmp.Reason
			res.Diff += cmp.Diff
		}
		return res
	}
	res.Status, res.Reason, res.Diff = cmp.Status, cmp.Reason, cmp.Diff
	if res.Status == mcpdiff.Same && r.cfg.MaxSlowdown > 0 && res.Before > 0 &&
		float64(res.After) > float64(res.Before)*r.cfg.MaxSlowdown && res.After-res.Before >= slowFloor {
		res.Status = mcpdiff.SlowDown
		res.Reason = fmt.Sprintf("%.1fx slower (%s → %s), past --max-slowdown %gx",
			float64(res.After)/float64(res.Before), ms(res.Before), ms(res.After), r.cfg.MaxSlowdown)
	}
	return res
}

// updated is the call as --update writes it: the new answer for a call that ran, the
// recorded one otherwise.
func (r *runner) updated(c *cassette.Call, res *CallResult) cassette.Recorded {
	rec := cassette.Recorded{Tool: c.Tool, Arguments: c.Arguments, Redacted: c.Redacted, RedactedKeys: c.RedactedKeys,
		Outcome: c.Outcome, Result: c.Result, Error: c.Error, StartedAt: c.StartedAt, Duration: c.Duration(), TooLarge: c.TooLarge}
	if res.Ran && res.After > 0 {
		rec.Result, rec.Error, rec.Duration, rec.StartedAt = res.newResult, res.newError, res.After, time.Now()
		switch {
		case res.newError != nil:
			rec.Outcome = "rpc_error"
		case string(jsonlex.Get(res.newResult, "isError")) == "true":
			rec.Outcome = "tool_error"
		default:
			rec.Outcome = "ok"
		}
	}
	return rec
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', -1, 64) + "ms"
}

// FileSource opens the cassette at path.
func FileSource(path string) func() (Source, error) {
	return func() (Source, error) {
		f, err := regular.OpenNoWait(path)
		if err != nil {
			return nil, err
		}
		// Not a regular file (a pipe, <(…); a FIFO; a device): read once, as it comes.
		st, err := f.Stat()
		once := err != nil || !st.Mode().IsRegular()
		r, err := cassette.NewReader(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		return &fileSource{r: r, f: f, once: once}, nil
	}
}

type fileSource struct {
	r    *cassette.Reader
	f    *os.File
	once bool
}

func (s *fileSource) Streamed() bool { return s.once }

func (s *fileSource) Header() *cassette.Header      { return s.r.Header() }
func (s *fileSource) Next() (*cassette.Call, error) { return s.r.Next() }
func (s *fileSource) Skip() error                   { return s.r.Skip() }
func (s *fileSource) Close() error                  { return s.f.Close() }
