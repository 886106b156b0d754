// Command mcpserver is a real MCP server (mcp-go, stdio transport) used as
// the upstream in end-to-end tests and in the README's demo. It speaks both
// protocol eras: the initialize handshake and the stateless 2026-07-28 core.
//
// Tools:
//
//	echo {text}            returns text unchanged
//	add {a, b}             returns a+b
//	big {size}             returns size bytes of text
//	progress {steps}       sends steps notifications/progress for the request's
//	                       progressToken, all before the result, then returns
//	sample {prompt}        asks the host for an LLM completion and returns its text
//	elicit {message}       asks the host for {name} and returns what came back
//	slow {ms}              waits ms (default 60000) or until cancelled; says which.
//	                       Given a progressToken, it first sends one progress
//	                       notification, so a test knows the call is in flight
//	                       and a notifications/cancelled it sends will land
//	fail {message}         returns a result with isError: true
//	log {level, text}      sends a notifications/message log entry, then returns
//
// sample and elicit are written as multi round-trip handlers: a stateless-era
// host gets an input_required result and retries, while for a session-era host
// mcp-go sends the old server-to-client sampling/createMessage or
// elicitation/create request instead. Either way the request crosses the
// proxy, which is what the tests need.
//
// It also has one resource (fixture://greeting), one prompt (greet), the
// logging capability and tools.listChanged. It exits 0 on stdin EOF, SIGTERM
// or SIGINT. With --pidfile FILE it writes its pid to FILE at start.
//
// With --http it serves Streamable HTTP instead of stdio (--stateless: without
// sessions), with --sse the 2024-11-05 HTTP+SSE transport, on 127.0.0.1, and
// prints its URL as the first line of stdout; it still exits on stdin EOF.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	pidfile := fs.String("pidfile", "", "write the pid to `FILE` at start")
	httpMode := fs.Bool("http", false, "serve Streamable HTTP")
	stateless := fs.Bool("stateless", false, "with --http: no sessions")
	sseMode := fs.Bool("sse", false, "serve HTTP+SSE (2024-11-05)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *httpMode || *sseMode {
		if err := serveHTTP(*sseMode, *stateless); err != nil {
			fmt.Fprintf(os.Stderr, "mcpserver: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*pidfile); err != nil {
		fmt.Fprintf(os.Stderr, "mcpserver: %v\n", err)
		os.Exit(1)
	}
}

func run(pidfile string) error {
	if pidfile != "" {
		tmp := pidfile + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("writing pidfile: %w", err)
		}
		if err := os.Rename(tmp, pidfile); err != nil {
			return fmt.Errorf("writing pidfile: %w", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// mcp-go writes responses under its own lock but server-to-client
	// requests straight to the writer; one lock around every write keeps a
	// large message from interleaving with another on the pipe.
	out := &lockedWriter{w: os.Stdout}
	stdio := server.NewStdioServer(newServer(out))
	err := stdio.Listen(ctx, os.Stdin, out)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serving stdio: %w", err)
	}
	return nil
}

// serveHTTP serves the same server over HTTP until stdin closes or a signal comes.
func serveHTTP(sse, stateless bool) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s := newServer(nil)
	var h http.Handler
	path := "/mcp"
	if sse {
		path = "/sse"
		h = server.NewSSEServer(s, server.WithBaseURL("http://"+ln.Addr().String()))
	} else {
		h = server.NewStreamableHTTPServer(s, server.WithStateLess(stateless))
	}
	srv := &http.Server{Handler: h}
	fmt.Printf("http://%s%s\n", ln.Addr(), path)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newServer(out *lockedWriter) *server.MCPServer {
	s := server.NewMCPServer("mcpserver", "0.1.0",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithElicitation(),
		server.WithRecovery(),
	)
	s.EnableSampling()

	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns text unchanged"),
		mcp.WithString("text", mcp.Required(), mcp.Description("Text to return")),
	), echo)
	s.AddTool(mcp.NewTool("add",
		mcp.WithDescription("Adds two numbers"),
		mcp.WithNumber("a", mcp.Required()),
		mcp.WithNumber("b", mcp.Required()),
	), add)
	s.AddTool(mcp.NewTool("big",
		mcp.WithDescription("Returns size bytes of text"),
		mcp.WithNumber("size", mcp.Required(), mcp.Description("Bytes of text to return")),
	), big)
	s.AddTool(mcp.NewTool("progress",
		mcp.WithDescription("Sends progress notifications, then returns"),
		mcp.WithNumber("steps", mcp.DefaultNumber(3), mcp.Description("Notifications to send")),
	), progress(out))
	s.AddTool(mcp.NewTool("sample",
		mcp.WithDescription("Asks the host's LLM and returns its answer"),
		mcp.WithString("prompt", mcp.Description("What to ask")),
	), sample)
	s.AddTool(mcp.NewTool("elicit",
		mcp.WithDescription("Asks the user for a name and returns the answer"),
		mcp.WithString("message", mcp.Description("What to ask")),
	), elicit)
	s.AddTool(mcp.NewTool("slow",
		mcp.WithDescription("Waits ms milliseconds or until cancelled"),
		mcp.WithNumber("ms", mcp.DefaultNumber(60000)),
	), slow(out))
	s.AddTool(mcp.NewTool("fail",
		mcp.WithDescription("Returns a tool error"),
		mcp.WithString("message"),
	), fail)
	s.AddTool(mcp.NewTool("log",
		mcp.WithDescription("Sends a log message notification"),
		mcp.WithString("level", mcp.DefaultString("info")),
		mcp.WithString("text", mcp.Required()),
	), logTool)

	s.AddResource(mcp.NewResource("fixture://greeting", "greeting",
		mcp.WithResourceDescription("A fixed greeting"),
		mcp.WithMIMEType("text/plain"),
	), func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{
			URI: req.Params.URI, MIMEType: "text/plain", Text: "hello from mcpserver",
		}}, nil
	})
	s.AddPrompt(mcp.NewPrompt("greet",
		mcp.WithPromptDescription("Greets someone"),
		mcp.WithArgument("name", mcp.RequiredArgument()),
	), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return mcp.NewGetPromptResult("A greeting", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Say hello to "+req.Params.Arguments["name"])),
		}), nil
	})
	return s
}

func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

func add(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, err := req.RequireFloat("a")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	b, err := req.RequireFloat("b")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(strconv.FormatFloat(a+b, 'g', -1, 64)), nil
}

func big(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	size, err := req.RequireInt("size")
	if err != nil || size < 0 {
		return mcp.NewToolResultError("size must be a non-negative number"), nil
	}
	return mcp.NewToolResultText(strings.Repeat("x", size)), nil
}

// progress writes its notifications itself rather than through mcp-go's
// notification queue: that queue is drained by another goroutine, so the
// result could overtake them and a test could not rely on having seen every
// notification once the result is in.
func progress(out *lockedWriter) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		steps := req.GetInt("steps", 3)
		if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
			return mcp.NewToolResultText("no progressToken, no notifications"), nil
		}
		token := req.Params.Meta.ProgressToken
		for i := 1; i <= steps; i++ {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("progress cancelled at step %d: %w", i, err)
			}
			if err := writeProgress(ctx, out, token, i, steps, fmt.Sprintf("step %d/%d", i, steps)); err != nil {
				return nil, err
			}
		}
		return mcp.NewToolResultText(fmt.Sprintf("done after %d progress notifications", steps)), nil
	}
}

func sample(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if answer := server.SamplingResponse(req.Params.InputResponses, "answer"); answer != nil {
		return mcp.NewToolResultText(mcp.GetTextFromContent(answer.Content)), nil
	}
	prompt := req.GetString("prompt", "Say something.")
	return server.NewInputRequestBuilder("sample-1").
		Sample("answer", mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{
				Role:    mcp.RoleUser,
				Content: mcp.NewTextContent(prompt),
			}},
			MaxTokens: 100,
		}).
		ToolResult(), nil
}

func elicit(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if answer := server.ElicitationResponse(req.Params.InputResponses, "details"); answer != nil {
		content, err := json.Marshal(answer.Content)
		if err != nil {
			return nil, fmt.Errorf("encoding elicitation content: %w", err)
		}
		return mcp.NewToolResultText(fmt.Sprintf("action=%s content=%s", answer.Action, content)), nil
	}
	return server.NewInputRequestBuilder("elicit-1").
		Elicit("details", mcp.ElicitationParams{
			Mode:    mcp.ElicitationModeForm,
			Message: req.GetString("message", "What is your name?"),
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"name": map[string]any{"type": "string"},
				},
				"required": []string{"name"},
			},
		}).
		ToolResult(), nil
}

func slow(out *lockedWriter) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ms := req.GetInt("ms", 60000)
		timer := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer timer.Stop()
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			if err := writeProgress(ctx, out, req.Params.Meta.ProgressToken, 0, 1, "waiting"); err != nil {
				return nil, err
			}
		}
		select {
		case <-timer.C:
			return mcp.NewToolResultText(fmt.Sprintf("slow: completed after %dms", ms)), nil
		case <-ctx.Done():
			return mcp.NewToolResultText("slow: cancelled"), nil
		}
	}
}

// writeProgress writes a notifications/progress line directly, ahead of
// anything the handler returns afterwards.
// Over HTTP (out is nil) the notification goes through the session instead.
func writeProgress(ctx context.Context, out *lockedWriter, token mcp.ProgressToken, progress, total int, message string) error {
	params := map[string]any{
		"progressToken": token,
		"progress":      progress,
		"total":         total,
		"message":       message,
	}
	if out == nil {
		err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress", params)
		// mcp-go's HTTP server drops a notification its forwarder took off the
		// session's queue just as the request ended (it sees the request done and
		// returns); a pause lets each one out before the next step.
		time.Sleep(20 * time.Millisecond)
		return err
	}
	line, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/progress",
		"params":  params,
	})
	if err != nil {
		return fmt.Errorf("encoding progress notification: %w", err)
	}
	if _, err := out.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing progress notification: %w", err)
	}
	return nil
}

func fail(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError(req.GetString("message", "fail tool failed as asked")), nil
}

func logTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	level := mcp.LoggingLevel(req.GetString("level", "info"))
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	srv := server.ServerFromContext(ctx)
	if err := srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(level, "mcpserver", text)); err != nil {
		return mcp.NewToolResultError("sending log message: " + err.Error()), nil
	}
	return mcp.NewToolResultText("logged"), nil
}
