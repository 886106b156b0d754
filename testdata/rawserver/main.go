// Command rawserver is a raw NDJSON fixture that stands in for an MCP server
// when what is under test is byte fidelity, process handling or throughput.
//
// It never decodes and re-encodes a message: ids, arguments and unknown
// fields are found with gjson and copied as the exact bytes received, so a
// test can tell whether anything between it and the host altered a line
// (mcp-go servers, for one, round ids past 2^53).
//
// Flags, all optional and combinable:
//
//	--record FILE     append every received line, terminator included, to FILE
//	                  (one write per line, so a test can read it while we run)
//	--echo            write every received line back on stdout as received
//	                  (a final line that had no terminator gets "\n")
//	--reply           answer each request (an object with "id" and "method";
//	                  inside a batch too) with the id's raw bytes:
//	                    initialize       a plausible result, echoing the client's protocolVersion
//	                    tools/list       echo (and env with --env, or the names in --tools-file)
//	                    tools/call       text content = the raw params.arguments, as a JSON string;
//	                                     tool "env" with --env: the environment as a JSON array of "K=V";
//	                                     tool "fail": a result with isError: true;
//	                                     tool "rpc_error": a JSON-RPC error -32000;
//	                                     tool "need_input": resultType "input_required" until the
//	                                       retry carries params.inputResponses, then "complete";
//	                                     tool "hang": never answered (for cancellation and loss tests)
//	                                     tool "partial": the first 2.5 MB of an answer (under
//	                                       arguments.size bytes if given; cut just after a "}",
//	                                       no newline), then exit with --exit-code: a server
//	                                       that died in the middle of a large line;
//	                                     tool "stall": the same head, then a pause of
//	                                       arguments.ms, then arguments.more bytes more of
//	                                       it and its end and newline (a server that stalls
//	                                       mid-line); with arguments.exit, no end: it exits
//	                                     tool "partial_hang": the same, then write "rawserver: partial
//	                                       answer written" to stderr and stop (nothing more read or
//	                                       written) until a signal, to be killed mid-message
//	                                     tools "task", "task_forever", "task_legacy",
//	                                       "task_legacy_forever": a task handle of either era,
//	                                       followed with tasks/get, tasks/result, tasks/cancel
//	                                       (tasks.go)
//	                    server/discover  error -32601, as a session-era server answers it
//	                                     (with --discover, a stateless-era result)
//	                    subscriptions/listen  no answer (a stream): its acknowledgment (--ack-without)
//	                    anything else    an empty result {}
//	                  and a line that is not JSON with a -32700 parse error (id null)
//	--reply-size N    tools/call results carry an N-byte text instead of the
//	                  arguments (built once; the named tools above keep theirs)
//	--result-dir DIR  a tools/call of NAME answers, as its result, the bytes of
//	                  DIR/NAME.json when that file exists (read at each call)
//	--tools-pages FILE  tools/list answered from FILE, read at start: a JSON array of
//	                  results, sent as written; a request without params.cursor gets
//	                  the first, one with cursor "N" the N-th (from 0); tests rewrite
//	                  FILE between runs to change the tools' definitions
//	--tools-file FILE tool names for tools/list, one a line, read at start (tests
//	                  rewrite it between runs to change the list a revived server shows)
//	--ack-without FILE  a subscriptions/listen (never answered: a stream) gets
//	                  notifications/subscriptions/acknowledged with its id in _meta and
//	                  its filter, less the member named in FILE when FILE exists (read
//	                  at each listen; tests write it between runs)
//	--env             enable the "env" tool
//	--discover        answer server/discover as a stateless-era (2026-07-28) server
//	--no-initialize   answer initialize with error -32601, as a server of the stateless
//	                  era alone does
//	--strict-tools    a tools/call of a tool that is neither listed nor one of the
//	                  named ones above gets error -32602 "Unknown tool", as SDK
//	                  servers answer it
//	--emit FILE       copy FILE to stdout verbatim at start (scripted output)
//	--protocol-version V  answer initialize with version V, whatever the client asked
//	                  (a server that was upgraded under a running session)
//	--crash-every N   exit with --exit-code on every N-th tools/call received,
//	                  without answering it (a server that crashes under load)
//	--starts FILE     append our pid and a newline to FILE at start (one line per
//	                  start: a test counts the starts of a revived server)
//	--exit-after N    exit after the N-th received line has been handled
//	--exit-code C     status for every exit (default 0)
//	--exit-now        exit at once with --exit-code, after writing --stderr
//	--stderr TEXT     write TEXT (exactly, no newline added) to stderr at start
//	--ignore-sigterm  ignore SIGTERM, so whoever stops us must SIGKILL
//	--ignore-eof      keep running after stdin ends (a server that must be signalled)
//	--pidfile FILE    write our pid to FILE at start, before stdin is read (so
//	                  once anything has been answered, the file exists)
//	--grandchild      start a copy of ourselves that blocks until a signal kills
//	                  it; its pid goes to FILE.grandchild (needs --pidfile)
//	--detach          with --grandchild: the copy leaves our process group and
//	                  session (setsid, as Node's spawn({detached:true}) does),
//	                  keeping our stdout open
//
// On stdin EOF it flushes and exits with --exit-code. Lines have no length
// limit. Nothing but the protocol bytes described above reaches stdout.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	record        string
	echo          bool
	reply         bool
	replySize     int
	resultDir     string
	toolsFile     string
	toolsPages    string
	env           bool
	discover      bool
	noInitialize  bool
	strictTools   bool
	emit          string
	exitAfter     int
	exitCode      int
	exitNow       bool
	stderrText    string
	ignoreSigterm bool
	pidfile       string
	grandchild    bool
	detach        bool
	blockForever  bool
	ignoreEOF     bool
	protoVersion  string
	crashEvery    int
	starts        string
	ackWithout    string
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("rawserver", flag.ContinueOnError)
	fs.StringVar(&cfg.record, "record", "", "append every received line to `FILE`")
	fs.BoolVar(&cfg.echo, "echo", false, "write every received line back")
	fs.BoolVar(&cfg.reply, "reply", false, "answer requests")
	fs.IntVar(&cfg.replySize, "reply-size", 0, "tools/call results carry an `N`-byte text")
	fs.StringVar(&cfg.resultDir, "result-dir", "", "a tools/call of NAME answers the result in `DIR`/NAME.json, when there is one")
	fs.StringVar(&cfg.toolsFile, "tools-file", "", "tool names for tools/list, one a line, from `FILE`")
	fs.StringVar(&cfg.toolsPages, "tools-pages", "", "tools/list results, a JSON array, from `FILE`")
	fs.StringVar(&cfg.ackWithout, "ack-without", "", "listen acknowledgments leave out the filter member named in `FILE`")
	fs.BoolVar(&cfg.env, "env", false, "enable the env tool")
	fs.BoolVar(&cfg.discover, "discover", false, "answer server/discover as a stateless-era server")
	fs.BoolVar(&cfg.noInitialize, "no-initialize", false, "answer initialize with error -32601")
	fs.BoolVar(&cfg.strictTools, "strict-tools", false, "answer calls of unknown tools with an error")
	fs.StringVar(&cfg.emit, "emit", "", "copy `FILE` to stdout at start")
	fs.IntVar(&cfg.exitAfter, "exit-after", 0, "exit after `N` received lines")
	fs.StringVar(&cfg.protoVersion, "protocol-version", "", "answer initialize with version `V`")
	fs.IntVar(&cfg.crashEvery, "crash-every", 0, "exit on every `N`-th tools/call")
	fs.StringVar(&cfg.starts, "starts", "", "append the pid to `FILE` at start")
	fs.IntVar(&cfg.exitCode, "exit-code", 0, "exit status")
	fs.BoolVar(&cfg.exitNow, "exit-now", false, "exit at once")
	fs.StringVar(&cfg.stderrText, "stderr", "", "write `TEXT` to stderr at start")
	fs.BoolVar(&cfg.ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM")
	fs.StringVar(&cfg.pidfile, "pidfile", "", "write the pid to `FILE`")
	fs.BoolVar(&cfg.grandchild, "grandchild", false, "start a blocking copy of ourselves")
	fs.BoolVar(&cfg.detach, "detach", false, "with --grandchild: the copy calls setsid")
	fs.BoolVar(&cfg.ignoreEOF, "ignore-eof", false, "keep running after stdin ends, until a signal")
	// Internal: the mode a --grandchild copy runs in.
	fs.BoolVar(&cfg.blockForever, "block-forever", false, "")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "rawserver: %v\n", err)
		os.Exit(1)
	}
	os.Exit(cfg.exitCode)
}

func run(cfg config) error {
	// Ignored before anything observable happens (pidfile, first echo), so a
	// test that has seen either knows a SIGTERM it sends now is discarded.
	if cfg.ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
	}
	if cfg.blockForever {
		return blockForever()
	}
	if cfg.grandchild {
		if cfg.pidfile == "" {
			return errors.New("--grandchild needs --pidfile")
		}
		if err := startGrandchild(cfg.pidfile+".grandchild", cfg.detach); err != nil {
			return err
		}
	}
	// Our own pidfile comes after the grandchild's, so a test that sees it
	// knows both exist.
	if cfg.pidfile != "" {
		if err := writePidfile(cfg.pidfile, os.Getpid()); err != nil {
			return err
		}
	}
	if cfg.starts != "" {
		if err := appendLine(cfg.starts, strconv.Itoa(os.Getpid())); err != nil {
			return err
		}
	}
	if cfg.stderrText != "" {
		if _, err := io.WriteString(os.Stderr, cfg.stderrText); err != nil {
			return fmt.Errorf("writing --stderr text: %w", err)
		}
	}
	if cfg.exitNow {
		return nil
	}

	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	if cfg.emit != "" {
		if err := emitFile(out, cfg.emit); err != nil {
			return err
		}
	}

	var record *os.File
	if cfg.record != "" {
		f, err := os.OpenFile(cfg.record, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening --record file: %w", err)
		}
		defer f.Close()
		record = f
	}

	var r *replier
	if cfg.reply {
		var err error
		if r, err = newReplier(cfg); err != nil {
			return err
		}
	}

	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	var long []byte
	for n := 1; ; n++ {
		line, err := readLine(in, &long)
		if len(line) > 0 {
			if record != nil {
				if _, werr := record.Write(line); werr != nil {
					return fmt.Errorf("recording line %d: %w", n, werr)
				}
			}
			if cfg.echo {
				out.Write(line)
				if line[len(line)-1] != '\n' {
					out.WriteByte('\n')
				}
			}
			if r != nil {
				r.answer(out, line)
				if r.then != thenGoOn {
					if ferr := out.Flush(); ferr != nil {
						return fmt.Errorf("writing stdout: %w", ferr)
					}
					switch r.then {
					case thenExit:
						return nil
					case thenStall:
						// The answer's end, written with the next flush.
						time.Sleep(r.stallFor)
						r.then = thenGoOn
						out.Write(stallTail(r.stallMore, r.stallExit))
						if r.stallExit {
							return out.Flush()
						}
					case thenEndless:
						chunk := bytes.Repeat([]byte("x"), 64<<10)
						for {
							if _, werr := out.Write(chunk); werr != nil {
								return fmt.Errorf("writing the endless line: %w", werr)
							}
						}
					default:
						fmt.Fprintln(os.Stderr, "rawserver: partial answer written")
						for { // killed mid-message, as a test means to do
							time.Sleep(time.Hour)
						}
					}
				}
			}
		}
		// Flushing only when no further input is already buffered keeps
		// throughput high under a burst without holding back an answer the
		// peer is waiting for.
		if err != nil || in.Buffered() == 0 || (cfg.exitAfter > 0 && n >= cfg.exitAfter) {
			if ferr := out.Flush(); ferr != nil {
				return fmt.Errorf("writing stdout: %w", ferr)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cfg.ignoreEOF {
					for { // only a signal ends us now (select{} would be a "deadlock")
						time.Sleep(time.Hour)
					}
				}
				return nil
			}
			return fmt.Errorf("reading stdin: %w", err)
		}
		if cfg.exitAfter > 0 && n >= cfg.exitAfter {
			return nil
		}
	}
}

// readLine returns the next line including its terminator (none at EOF). A
// line that fits the reader's buffer is returned without copying and is valid
// until the next read; a longer one is assembled in *long, whose capacity is
// kept for the next long line.
func readLine(in *bufio.Reader, long *[]byte) ([]byte, error) {
	line, err := in.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	buf := append((*long)[:0], line...)
	for {
		line, err = in.ReadSlice('\n')
		buf = append(buf, line...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			*long = buf
			return buf, err
		}
	}
}

func emitFile(out *bufio.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening --emit file: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(out, f); err != nil {
		return fmt.Errorf("copying --emit file: %w", err)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("writing --emit file to stdout: %w", err)
	}
	return nil
}

// appendLine appends line and a newline to path in one write, so lines of several
// processes never cut into each other.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening --starts file: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return fmt.Errorf("writing --starts file: %w", err)
	}
	return nil
}

// writePidfile writes through a temporary file and a rename, so a reader
// never sees a half-written pid.
func writePidfile(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing pidfile: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing pidfile: %w", err)
	}
	return nil
}

// startGrandchild starts a copy of this program that only a signal ends. It
// stays in our process group and shares our stdout and stderr, as the node
// process under an `npx` wrapper does, so it is what a proxy that signals
// only its direct child, or waits for its pipes to close, would leak.
func startGrandchild(pidfile string, detach bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding own executable: %w", err)
	}
	// Its stdin is a pipe it also holds the write end of (fd 3), so its read
	// never reaches EOF: neither our exit nor a closed proxy pipe ends it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("creating grandchild stdin: %w", err)
	}
	defer pr.Close()
	defer pw.Close()
	cmd := exec.Command(self, "--block-forever")
	cmd.Stdin = pr
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{pw}
	if detach {
		setsid(cmd)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting grandchild: %w", err)
	}
	if err := writePidfile(pidfile, cmd.Process.Pid); err != nil {
		return err
	}
	// Not waited for: it is meant to outlive us unless someone kills the group.
	return cmd.Process.Release()
}

func blockForever() error {
	// Reads our own stdin, whose write end we hold as fd 3: it never ends.
	_, err := io.Copy(io.Discard, os.Stdin)
	if err != nil {
		return fmt.Errorf("grandchild reading stdin: %w", err)
	}
	return errors.New("grandchild stdin ended (fd 3 was not inherited)")
}

func readToolsFile(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --tools-file: %w", err)
	}
	var names []string
	for _, name := range strings.Split(string(data), "\n") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	return names, nil
}
