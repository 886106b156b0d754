package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// replier builds answers by splicing raw bytes: the id and the arguments it
// echoes are copied from the request exactly as received. Answers are
// assembled in one reused buffer, since rawserver is also the "direct"
// baseline the proxy's overhead is measured against.
type replier struct {
	env          bool
	protoVersion string // --protocol-version
	crashEvery   int    // --crash-every
	calls        int    // tools/calls received
	// then is what rawserver does once the answer is out: the "partial" tools and
	// --crash-every make it exit, or stop.
	then       afterAnswer
	stallFor   time.Duration // thenStall: how long the answer's middle waits
	stallMore  int           // and how many bytes more of it come after
	stallExit  bool          // then exit with --exit-code, the answer unended
	discover   bool
	noInit     bool
	known      map[string]bool // with --strict-tools: the tools a call may name
	toolsList  []byte          // the whole tools/list result
	bigResult  []byte          // the tools/call result for --reply-size, built once
	replySize  int             // --reply-size
	resultDir  string          // --result-dir
	bigPad     []byte          // --reply-size x's: the task tools' statusMessage, built when first used
	buf        []byte
	tasks      map[string]*rawTask // the task tools' tasks, by taskId (tasks.go)
	pages      [][]byte            // --tools-pages
	taskN      int
	ackWithout string // --ack-without
}

func newReplier(cfg config) (*replier, error) {
	names := []string{"echo"}
	if cfg.toolsFile != "" {
		var err error
		if names, err = readToolsFile(cfg.toolsFile); err != nil {
			return nil, err
		}
	}
	if cfg.env {
		names = append(names, "env")
	}
	list := []byte(`{"tools":[`)
	for i, name := range names {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, `{"name":`...)
		list = gjson.AppendJSONString(list, name)
		list = append(list, `,"description":"rawserver fixture tool","inputSchema":{"type":"object"}}`...)
	}
	list = append(list, "]}"...)

	r := &replier{env: cfg.env, discover: cfg.discover, noInit: cfg.noInitialize, toolsList: list, protoVersion: cfg.protoVersion, crashEvery: cfg.crashEvery}
	if cfg.toolsPages != "" {
		data, err := os.ReadFile(cfg.toolsPages)
		if err != nil {
			return nil, fmt.Errorf("reading --tools-pages: %w", err)
		}
		pages := gjson.ParseBytes(data)
		if !pages.IsArray() {
			return nil, fmt.Errorf("--tools-pages: not a JSON array")
		}
		pages.ForEach(func(_, v gjson.Result) bool {
			r.pages = append(r.pages, []byte(v.Raw))
			return true
		})
	}
	if cfg.strictTools {
		r.known = map[string]bool{"fail": true, "rpc_error": true, "need_input": true, "hang": true}
		for name := range taskTools {
			r.known[name] = true
		}
		for _, name := range names {
			r.known[name] = true
		}
	}
	if cfg.replySize > 0 {
		big := make([]byte, 0, cfg.replySize+64)
		big = append(big, `{"content":[{"type":"text","text":"`...)
		big = append(big, bytes.Repeat([]byte{'x'}, cfg.replySize)...)
		big = append(big, `"}],"isError":false}`...)
		r.bigResult = big
		r.replySize = cfg.replySize
	}
	r.resultDir = cfg.resultDir
	r.ackWithout = cfg.ackWithout
	return r, nil
}

// request holds the members of one message that rawserver looks at, found
// in a single pass over each object: with a gjson Get per member, lookups
// were most of the time of a --reply run.
type request struct {
	id, method, params gjson.Result
	name, arguments    gjson.Result // members of params
	protocolVersion    gjson.Result
	inputResponses     gjson.Result
	taskID             gjson.Result // params.taskId of the task methods
	notifications      gjson.Result // params.notifications of subscriptions/listen
}

func parseRequest(msg gjson.Result) request {
	var req request
	first := func(dst *gjson.Result, v gjson.Result) {
		if !dst.Exists() { // the first of duplicate keys, as gjson.Get picks
			*dst = v
		}
	}
	msg.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			first(&req.id, v)
		case "method":
			first(&req.method, v)
		case "params":
			first(&req.params, v)
		}
		return true
	})
	if req.params.IsObject() {
		req.params.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "name":
				first(&req.name, v)
			case "arguments":
				first(&req.arguments, v)
			case "protocolVersion":
				first(&req.protocolVersion, v)
			case "inputResponses":
				first(&req.inputResponses, v)
			case "taskId":
				first(&req.taskID, v)
			case "notifications":
				first(&req.notifications, v)
			}
			return true
		})
	}
	return req
}

// answered reports whether req is a request rawserver answers.
func (req request) answered() bool {
	if !req.id.Exists() || req.method.Type != gjson.String {
		return false
	}
	if req.method.Str == "subscriptions/listen" {
		return false // a stream: acknowledged (appendAck), never answered
	}
	return req.method.Str != "tools/call" || req.name.Str != "hang"
}

// appendAck appends the notifications/subscriptions/acknowledged a listen request
// gets: its id in _meta, and the filter it asked for, less the member named in the
// --ack-without file when there is one (a server that does not support it).
func (r *replier) appendAck(buf []byte, req request) []byte {
	drop := ""
	if r.ackWithout != "" {
		if b, err := os.ReadFile(r.ackWithout); err == nil {
			drop = strings.TrimSpace(string(b))
		}
	}
	buf = append(buf, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":`...)
	buf = append(buf, req.id.Raw...)
	buf = append(buf, `},"notifications":{`...)
	n := 0
	req.notifications.ForEach(func(k, v gjson.Result) bool {
		if k.Str == drop {
			return true
		}
		if n++; n > 1 {
			buf = append(buf, ',')
		}
		buf = append(append(append(buf, k.Raw...), ':'), v.Raw...)
		return true
	})
	return append(buf, "}}}"...)
}

// answer writes the response(s) line owes: one for a request, an array for a
// batch holding requests, a parse error for a line that is not JSON, nothing
// for notifications, responses or blank lines.
func (r *replier) answer(out *bufio.Writer, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	msg := gjson.ParseBytes(line)
	buf := r.buf[:0]
	switch {
	case !gjson.ValidBytes(line):
		// What a JSON-RPC server owes a line it cannot parse.
		buf = append(buf, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`+"\n"...)
	case msg.IsObject():
		if req := parseRequest(msg); req.answered() {
			buf = append(r.appendResponse(buf, req), '\n')
		} else if req.id.Exists() && req.method.Str == "subscriptions/listen" {
			buf = append(r.appendAck(buf, req), '\n')
		}
	case msg.IsArray():
		msg.ForEach(func(_, elem gjson.Result) bool {
			if !elem.IsObject() {
				return true
			}
			if req := parseRequest(elem); req.answered() {
				if len(buf) == 0 {
					buf = append(buf, '[')
				} else {
					buf = append(buf, ',')
				}
				buf = r.appendResponse(buf, req)
			}
			return true
		})
		if len(buf) > 0 {
			buf = append(buf, ']', '\n')
		}
	}
	if r.then != thenGoOn {
		buf = bytes.TrimSuffix(buf, []byte("\n")) // the partial answer is never finished
	}
	out.Write(buf)
	// A 64 MiB answer's buffer is not worth keeping for the small ones.
	if cap(buf) <= 1<<20 {
		r.buf = buf
	}
}

func (r *replier) appendResponse(buf []byte, req request) []byte {
	id := req.id.Raw
	switch req.method.Str {
	case "initialize":
		if r.noInit {
			return appendError(buf, id, -32601, "Method not found: initialize")
		}
		buf = appendResultStart(buf, id)
		buf = append(buf, `{"protocolVersion":`...)
		if r.protoVersion != "" {
			buf = gjson.AppendJSONString(buf, r.protoVersion)
		} else if req.protocolVersion.Type == gjson.String {
			buf = append(buf, req.protocolVersion.Raw...)
		} else {
			buf = append(buf, `"2025-06-18"`...)
		}
		buf = append(buf, `,"capabilities":{"tools":{"listChanged":true},"logging":{}},`+
			`"serverInfo":{"name":"rawserver","version":"0.0.1"}}`...)
	case "tools/list":
		if r.pages != nil {
			n := 0
			if c := req.params.Get("cursor"); c.Exists() {
				n, _ = strconv.Atoi(c.String())
			}
			if n < 0 || n >= len(r.pages) {
				return appendError(buf, id, -32602, "Invalid cursor")
			}
			buf = append(appendResultStart(buf, id), r.pages[n]...)
			break
		}
		buf = append(appendResultStart(buf, id), r.toolsList...)
	case "tools/call":
		if r.calls++; r.crashEvery > 0 && r.calls%r.crashEvery == 0 {
			r.then = thenExit // unanswered: the caller exits before writing anything more
			return buf
		}
		switch name := req.name.Str; {
		case r.known != nil && !r.known[name]:
			return appendError(buf, id, -32602, "Unknown tool: "+name)
		case name == "rpc_error":
			return appendError(buf, id, -32000, "rpc_error tool failed as asked")
		case name == "fail":
			buf = appendTextResult(appendResultStart(buf, id), "fail tool failed as asked", true)
		case name == "stall":
			// The head of a long answer, a pause, then its end (main's loop).
			r.then, r.stallFor = thenStall, time.Duration(req.arguments.Get("ms").Int())*time.Millisecond
			r.stallMore, r.stallExit = int(req.arguments.Get("more").Int()), req.arguments.Get("exit").Bool()
			size := partialSize
			if n := req.arguments.Get("size").Int(); n > 0 {
				size = int(n)
			}
			return appendPartial(appendResultStart(buf, id), size)
		case name == "partial" || name == "partial_hang":
			r.then = thenExit
			if name == "partial_hang" {
				r.then = thenHang
			}
			size := partialSize
			if n := req.arguments.Get("size").Int(); n > 0 {
				size = int(n)
			}
			return appendPartial(appendResultStart(buf, id), size)
		case r.resultDir != "" && !strings.ContainsAny(name, `/\.`) && fileExists(filepath.Join(r.resultDir, name+".json")):
			b, _ := os.ReadFile(filepath.Join(r.resultDir, name+".json"))
			buf = append(appendResultStart(buf, id), bytes.TrimRight(b, "\r\n")...)
		case name == "endless":
			r.then = thenEndless
			return append(appendResultStart(buf, id), `{"content":[{"type":"text","text":"`...)
		case taskTools[name]:
			return r.appendTaskHandle(buf, id, req)
		case name == "need_input":
			buf = appendNeedInput(appendResultStart(buf, id), req.inputResponses.Exists())
		case name == "env" && r.env:
			buf = appendTextResult(appendResultStart(buf, id), environJSON(), false)
		case r.bigResult != nil:
			buf = append(appendResultStart(buf, id), r.bigResult...)
		default:
			buf = appendTextResult(appendResultStart(buf, id), req.arguments.Raw, false)
		}
	case "tasks/get", "tasks/result", "tasks/cancel":
		return r.appendTaskMethod(buf, id, req)
	case "server/discover":
		if !r.discover {
			return appendError(buf, id, -32601, "Method not found")
		}
		buf = append(appendResultStart(buf, id), `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},`+
			`"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rawserver","version":"0.0.1"}}}`...)
	default:
		buf = append(appendResultStart(buf, id), `{}`...)
	}
	return append(buf, '}')
}

func appendResultStart(buf []byte, id string) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	return append(buf, `,"result":`...)
}

// appendTextResult appends a tools/call result with one text content.
func appendTextResult(buf []byte, text string, isError bool) []byte {
	buf = append(buf, `{"content":[{"type":"text","text":`...)
	buf = gjson.AppendJSONString(buf, text)
	if isError {
		return append(buf, `}],"isError":true}`...)
	}
	return append(buf, `}],"isError":false}`...)
}

// afterAnswer is what rawserver does after writing an answer.
type afterAnswer int

const (
	thenGoOn    afterAnswer = iota
	thenExit                // exit with --exit-code: a server that died mid-line
	thenHang                // write nothing more, read nothing more, until a signal
	thenEndless             // the answer's line goes on for ever: "x"s, until stdout breaks
	thenStall               // pause stallFor, then end the answer (stallTail) and go on
)

// stallTail is the rest of the answer of the "stall" tool that appendPartial began:
// about more bytes of elements, the answer's end and its newline (none when the
// server exits after it).
func stallTail(more int, exit bool) []byte {
	const elem = `,{"type":"text","text":"x"}`
	buf := make([]byte, 0, more+len(elem)+4)
	for len(buf) < more {
		buf = append(buf, elem...)
	}
	if exit {
		return buf
	}
	return append(buf, "]}}\n"...)
}

// partialSize is the length of the cut-off answer of the "partial" tools unless the
// call's arguments say "size": over the 1 MiB past which a proxy might judge a line
// by its ends.
const partialSize = 5 << 19

// appendPartial appends the head of a tools/call result that never ends, so that the
// line (from its start, at buf's) is under size bytes: an unfinished content array
// whose cut falls just after an element's "}", so the partial line has the ends of a
// JSON object. No newline follows.
func appendPartial(buf []byte, size int) []byte {
	start := bytes.LastIndexByte(buf, '\n') + 1 // the line's start
	buf = append(buf, `{"content":[`...)
	const elem = `{"type":"text","text":"x"}`
	for n := 0; len(buf)-start+len(elem)+1 < size; n++ {
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, elem...)
	}
	return buf
}

// appendNeedInput mimics a stateless-era tool that asks for a confirmation
// before it completes (a multi round-trip request).
func appendNeedInput(buf []byte, retried bool) []byte {
	if retried {
		return append(buf, `{"content":[{"type":"text","text":"got input"}],"isError":false,"resultType":"complete"}`...)
	}
	return append(buf, `{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create",`+
		`"params":{"mode":"form","message":"Proceed?","requestedSchema":{"type":"object",`+
		`"properties":{"ok":{"type":"boolean"}}}}}},"requestState":"rawserver-state-1"}`...)
}

// appendError appends a whole error response (no closing brace owed).
func appendError(buf []byte, id string, code int, message string) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"error":{"code":`...)
	buf = strconv.AppendInt(buf, int64(code), 10)
	buf = append(buf, `,"message":`...)
	buf = gjson.AppendJSONString(buf, message)
	return append(buf, "}}"...)
}

// environJSON is the process environment as a JSON array of "K=V" strings.
func environJSON() string {
	arr := []byte{'['}
	for i, kv := range os.Environ() {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = gjson.AppendJSONString(arr, kv)
	}
	return string(append(arr, ']'))
}

// fileExists reports whether path is a file (--result-dir).
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
