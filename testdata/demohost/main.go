// Command demohost is a small MCP host for the README's first command and the
// end-to-end tests:
//
//	demohost [--era auto|session|stateless] [--timeout 30s] -- COMMAND [ARGS...]
//	demohost [--era ...] --url URL [--sse]
//
// e.g. `demohost -- bir-proxy --server demo -- mcpserver`. It starts COMMAND
// as a stdio MCP server (mcp-go client), initializes, lists tools, then calls
// echo, add, progress, sample, elicit and fail, answering the server's
// sampling and elicitation requests with canned replies, and closes. It
// prints a transcript of each step to stdout and exits 1, naming the step, as
// soon as one fails.
//
// Like a host with the bir hook installed, it adds the correlation key
// `_bir_call_id` ("demo-1", "demo-2", ...) to every tools/call's arguments.
// The key is meant to be removed by bir-proxy; pointed straight at a server,
// the server sees it as one more argument, which the demo's tools ignore.
//
// --era picks the protocol: session (initialize handshake), stateless
// (2026-07-28, no handshake; sampling and elicitation become input_required
// results the client retries), or auto (mcp-go's default: probe with
// server/discover, fall back to the handshake).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The canned answers the host gives the server's requests; the server must
// hand them back unchanged for the demo to pass.
const (
	sampledAnswer  = "Blue, like the sky over the proxy."
	elicitedName   = "Ada"
	correlationKey = "_bir_call_id"
	progressSteps  = 3
)

func main() {
	fs := flag.NewFlagSet("demohost", flag.ContinueOnError)
	era := fs.String("era", "auto", "protocol era: auto, session or stateless")
	timeout := fs.Duration("timeout", 30*time.Second, "give up on the whole demo after `DURATION`")
	serverURL := fs.String("url", "", "talk to this server over HTTP instead of starting a command")
	sse := fs.Bool("sse", false, "with --url: the HTTP+SSE transport")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: demohost [--era auto|session|stateless] [--timeout 30s] -- COMMAND [ARGS...]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	command := fs.Args()
	if len(command) == 0 && *serverURL == "" {
		fs.Usage()
		os.Exit(2)
	}
	var opts []client.ClientOption
	switch *era {
	case "auto":
	case "session":
		opts = append(opts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	case "stateless":
		opts = append(opts, client.WithProtocolVersion(mcp.LATEST_PROTOCOL_VERSION))
	default:
		fmt.Fprintf(os.Stderr, "demohost: unknown --era %q (want auto, session or stateless)\n", *era)
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	d := &demo{out: os.Stdout, era: *era, url: *serverURL, sse: *sse}
	if err := d.run(ctx, command, opts); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (gave up after --timeout %s)", err, *timeout)
		}
		fmt.Fprintf(os.Stderr, "demohost: FAILED at %s: %v\n", d.step, err)
		os.Exit(1)
	}
}

type demo struct {
	era string
	url string // talk HTTP to this server instead of starting a command
	sse bool
	// stateless is set once initialize settles the era; the sampling and
	// elicitation handlers read it from the transport's goroutines.
	stateless atomic.Bool

	mu   sync.Mutex // the transcript is written from handler goroutines too
	out  io.Writer
	step string
	done int

	calls    int
	progress chan mcp.JSONRPCNotification
}

func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) begin(step string) {
	d.step = step
	d.say("→ %s", step)
}

func (d *demo) run(ctx context.Context, command []string, opts []client.ClientOption) error {
	d.progress = make(chan mcp.JSONRPCNotification, 64)
	if d.url != "" {
		command = []string{d.url}
	}
	d.step = "start " + command[0]
	// The server's stderr (bir-proxy's log, for one) goes to ours, so the
	// transcript on stdout stays readable and nothing is lost.
	var tr transport.Interface
	switch {
	case d.url != "" && d.sse:
		sse, err := transport.NewSSE(d.url)
		if err != nil {
			return err
		}
		tr = sse
	case d.url != "":
		h, err := transport.NewStreamableHTTP(d.url, transport.WithContinuousListening())
		if err != nil {
			return err
		}
		tr = h
	default:
		tr = transport.NewStdioWithOptions(command[0], nil, command[1:],
			transport.WithCommandStderrWriter(os.Stderr))
	}
	opts = append(opts,
		client.WithSamplingHandler(samplingHandler{d}),
		client.WithElicitationHandler(elicitationHandler{d}))
	c := client.NewClient(tr, opts...)
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("starting %q: %w", strings.Join(command, " "), err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			select {
			case d.progress <- n:
			default: // more than the demo asked for; the count check reports it
			}
		}
	})

	steps := []func(context.Context, *client.Client) error{
		d.initialize, d.listTools, d.echo, d.add, d.callProgress, d.sample, d.elicit, d.fail,
	}
	for _, step := range steps {
		if err := step(ctx, c); err != nil {
			return err
		}
		d.done++
	}

	d.begin("close")
	closed = true
	if err := c.Close(); err != nil {
		return fmt.Errorf("server did not exit cleanly: %w", err)
	}
	d.say("← server exited cleanly")
	d.done++
	d.say("demo passed: %d steps", d.done)
	return nil
}

func (d *demo) initialize(ctx context.Context, c *client.Client) error {
	d.begin("initialize")
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "bir-demohost", Version: "0.1.0"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		return err
	}
	era := "session era"
	if mcp.IsModernProtocol(res.ProtocolVersion) {
		era = "stateless era"
		d.stateless.Store(true)
	}
	if d.era == "stateless" && !mcp.IsModernProtocol(res.ProtocolVersion) {
		return fmt.Errorf("asked for the stateless era, server settled on %s", res.ProtocolVersion)
	}
	d.say("← ok: %s %s, protocol %s (%s)", res.ServerInfo.Name, res.ServerInfo.Version, res.ProtocolVersion, era)
	return nil
}

func (d *demo) listTools(ctx context.Context, c *client.Client) error {
	d.begin("tools/list")
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	for _, want := range []string{"echo", "add", "progress", "sample", "elicit", "fail"} {
		if !slices.Contains(names, want) {
			return fmt.Errorf("server has no %q tool (it has %s)", want, strings.Join(names, ", "))
		}
	}
	d.say("← ok: %d tools: %s", len(names), strings.Join(names, ", "))
	return nil
}

// call sends one tools/call with the correlation key added, as a hooked host
// does, and returns its result.
func (d *demo) call(ctx context.Context, c *client.Client, tool string, args map[string]any, meta *mcp.Meta) (*mcp.CallToolResult, error) {
	d.calls++
	callID := fmt.Sprintf("demo-%d", d.calls)
	shown, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encoding arguments: %w", err)
	}
	d.step = "tools/call " + tool
	d.say("→ tools/call %s %s  (%s=%s)", tool, shown, correlationKey, callID)

	withKey := make(map[string]any, len(args)+1)
	for k, v := range args {
		withKey[k] = v
	}
	withKey[correlationKey] = callID
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = withKey
	req.Params.Meta = meta
	return c.CallTool(ctx, req)
}

// text returns the result's text, failing on a tool error.
func text(res *mcp.CallToolResult) (string, error) {
	var parts []string
	for _, content := range res.Content {
		parts = append(parts, mcp.GetTextFromContent(content))
	}
	joined := strings.Join(parts, "")
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", joined)
	}
	return joined, nil
}

func (d *demo) expectText(res *mcp.CallToolResult, err error, want string) error {
	if err != nil {
		return err
	}
	got, err := text(res)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("got %q, want %q", got, want)
	}
	d.say("← ok: %s", got)
	return nil
}

func (d *demo) echo(ctx context.Context, c *client.Client) error {
	res, err := d.call(ctx, c, "echo", map[string]any{"text": "hi"}, nil)
	return d.expectText(res, err, "hi")
}

func (d *demo) add(ctx context.Context, c *client.Client) error {
	res, err := d.call(ctx, c, "add", map[string]any{"a": 2, "b": 3}, nil)
	return d.expectText(res, err, "5")
}

func (d *demo) callProgress(ctx context.Context, c *client.Client) error {
	token := fmt.Sprintf("demo-progress-%d", d.calls+1)
	res, err := d.call(ctx, c, "progress", map[string]any{"steps": progressSteps}, &mcp.Meta{ProgressToken: token})
	if err != nil {
		return err
	}
	got, err := text(res)
	if err != nil {
		return err
	}
	// A server may send progress after the result (mcp-go queues its
	// notifications), so wait for each rather than count what has arrived.
	for i := 1; i <= progressSteps; i++ {
		select {
		case n := <-d.progress:
			p := n.Params.AdditionalFields
			if fmt.Sprint(p["progressToken"]) != token {
				return fmt.Errorf("progress notification for token %v, want %s", p["progressToken"], token)
			}
			d.say("← notifications/progress %v/%v: %v", p["progress"], p["total"], p["message"])
		case <-ctx.Done():
			return fmt.Errorf("got %d of %d progress notifications: %w", i-1, progressSteps, ctx.Err())
		}
	}
	d.say("← ok: %s", got)
	return nil
}

func (d *demo) sample(ctx context.Context, c *client.Client) error {
	res, err := d.call(ctx, c, "sample", map[string]any{"prompt": "Name a colour."}, nil)
	return d.expectText(res, err, sampledAnswer)
}

func (d *demo) elicit(ctx context.Context, c *client.Client) error {
	res, err := d.call(ctx, c, "elicit", map[string]any{"message": "What is your name?"}, nil)
	return d.expectText(res, err, `action=accept content={"name":"`+elicitedName+`"}`)
}

func (d *demo) fail(ctx context.Context, c *client.Client) error {
	res, err := d.call(ctx, c, "fail", map[string]any{"message": "this tool always fails"}, nil)
	if err != nil {
		return err
	}
	if _, err := text(res); err == nil {
		return errors.New("fail returned success, want a result with isError: true")
	}
	d.say("← tool error, as expected: %s", mcp.GetTextFromContent(res.Content[0]))
	return nil
}

// via says how a request from the server reached us: in the stateless era it
// comes inside an input_required result and our answer goes in the retry.
func (d *demo) via() string {
	if d.stateless.Load() {
		return " (in an input_required result; answered in the retry)"
	}
	return ""
}

type samplingHandler struct{ d *demo }

func (h samplingHandler) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var prompt string
	if len(req.Messages) > 0 {
		prompt = mcp.GetTextFromContent(req.Messages[0].Content)
	}
	h.d.say("  ← sampling/createMessage %q%s", prompt, h.d.via())
	h.d.say("  → answer %q", sampledAnswer)
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent(sampledAnswer)},
		Model:           "demohost-canned",
		StopReason:      "endTurn",
	}, nil
}

type elicitationHandler struct{ d *demo }

func (h elicitationHandler) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	h.d.say("  ← elicitation/create %q%s", req.Params.Message, h.d.via())
	h.d.say("  → accept {\"name\":%q}", elicitedName)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action:  mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"name": elicitedName},
	}}, nil
}
