// Command policyserver is a raw NDJSON fixture for the tool policy's tests
// (--ignore-tool, --allow-tool, --call-timeout): a server whose tools/list is
// paginated and written with odd spacing, whose list changes on request, and whose
// tools take as long as they are told to.
//
// Flags:
//
//	--record FILE  append every line received, newline included, to FILE
//	--sent FILE    append every line sent, newline included, to FILE (what the
//	               server said, to compare with what the host got)
//
// Requests (ids are copied as the raw bytes received):
//
//	initialize     a plausible result
//	tools/list     page 1 without params.cursor, page 2 for cursor "p2"; after the
//	               tool "change" was called, page 2 holds other tools
//	tools/call     "sleep" {"ms": N}: answered after N ms (by then it may be late);
//	               "progress" {"ms": N, "every": M}: a notifications/progress every
//	               M ms (to params._meta.progressToken), answered after N ms;
//	               "change": notifications/tools/list_changed, then answered;
//	               any other tool: answered at once with its name
//	anything else  an empty result; notifications get nothing
//
// A request whose params has "answerId" is answered with that member's raw value as
// its id instead of its own (a server answering 1.0000000000000001 for 1).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/bir-dev/bir-proxy/internal/jsonlex"
)

type server struct {
	mu      sync.Mutex
	out     *bufio.Writer
	sent    *os.File
	changed bool
	wg      sync.WaitGroup
}

func (s *server) send(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.WriteString(line + "\n")
	s.out.Flush()
	if s.sent != nil {
		s.sent.WriteString(line + "\n")
	}
}

// Page 1 has odd spacing, a tool whose name is escaped and fields of every kind, so
// that only a splice keeps it as it is.
const page1 = `{"jsonrpc":"2.0","id":%s,"result":{ "tools" : [ {"name":"echo","description":"says it back","inputSchema":{"type":"object"}} ,` +
	` {"name":"secret_a","inputSchema":{"type":"object"},"x-odd":[1,2.50,{"deep":true}]},{"name":"sleep","inputSchema":{"type":"object"}},` +
	`	{"name":"DELETE_file","inputSchema":{"type":"object"}} , {"name":"secret_\u0062","inputSchema":{"type":"object"}} ], "nextCursor" : "p2" , "_meta":{"k":9007199254740993}}}`

const page2 = `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"secret_c","inputSchema":{"type":"object"}},{"name":"progress","inputSchema":{"type":"object"}},{"name":"change","inputSchema":{"type":"object"}}]}}`

const page2Changed = `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"progress","inputSchema":{"type":"object"}},{"name":"new_tool","inputSchema":{"type":"object"}},{"name":"secret_d","inputSchema":{"type":"object"}}]}}`

func text(id []byte, s string) string {
	return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":` + jsonlex.Quote(s) + `}]}}`
}

func num(obj []byte, name string) int {
	n, _ := strconv.Atoi(string(jsonlex.Get(obj, name)))
	return n
}

func (s *server) handle(line []byte) {
	f, ok := jsonlex.TopFields(line)
	if !ok || f.Method == nil || f.ID == nil {
		return
	}
	id := f.ID
	if a := jsonlex.Get(f.Params, "answerId"); a != nil {
		id = a
	}
	switch jsonlex.StringOf(f.Method) {
	case "initialize":
		s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"policyserver","version":"1"}}}`)
	case "tools/list":
		page := page1
		if jsonlex.StringOf(jsonlex.Get(f.Params, "cursor")) == "p2" {
			s.mu.Lock()
			page = page2
			if s.changed {
				page = page2Changed
			}
			s.mu.Unlock()
		}
		s.send(fmt.Sprintf(page, id))
	case "tools/call":
		name := jsonlex.StringOf(jsonlex.Get(f.Params, "name"))
		args := jsonlex.Get(f.Params, "arguments")
		id := append([]byte(nil), id...)
		switch name {
		case "sleep":
			ms := num(args, "ms")
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				time.Sleep(time.Duration(ms) * time.Millisecond)
				s.send(text(id, "slept "+strconv.Itoa(ms)))
			}()
		case "progress":
			ms, every := num(args, "ms"), max(num(args, "every"), 1)
			token := string(jsonlex.Get(jsonlex.Get(f.Params, "_meta"), "progressToken"))
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				end := time.Now().Add(time.Duration(ms) * time.Millisecond)
				for n := 1; time.Until(end) > 0; n++ {
					time.Sleep(min(time.Duration(every)*time.Millisecond, time.Until(end)))
					if token != "" && time.Until(end) > 0 {
						s.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + token + `,"progress":` + strconv.Itoa(n) + `}}`)
					}
				}
				s.send(text(id, "progressed"))
			}()
		case "change":
			s.mu.Lock()
			s.changed = true
			s.mu.Unlock()
			s.send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			s.send(text(id, "changed"))
		default:
			s.send(text(id, "called "+name))
		}
	default:
		s.send(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}`)
	}
}

func main() {
	record := flag.String("record", "", "append every line received to this file")
	sent := flag.String("sent", "", "append every line sent to this file")
	flag.Parse()
	s := &server{out: bufio.NewWriter(os.Stdout)}
	var rec *os.File
	open := func(path string) *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "policyserver:", err)
			os.Exit(1)
		}
		return f
	}
	if *record != "" {
		rec = open(*record)
	}
	if *sent != "" {
		s.sent = open(*sent)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if rec != nil {
				rec.Write(line)
			}
			s.handle(line)
		}
		if err != nil {
			break
		}
	}
	s.wg.Wait()
}
