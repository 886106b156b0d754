package cassettecmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bir-dev/bir-proxy/cassette"
	"github.com/bir-dev/bir-proxy/internal/jsonlex"
	"github.com/bir-dev/bir-proxy/redact"
)

// mcp-recorder's cassette (github.com/devhelmhq/mcp-recorder, src/mcp_recorder/_types.py):
// one JSON document, {version, metadata, interactions[]}. An interaction is a
// "jsonrpc_request" (request and response, JSON-RPC messages as sent), a
// "notification" (request only) or a "lifecycle" HTTP exchange (http_method,
// http_path; no message). Members this reader does not use are ignored: the format
// adds them (transport_type) without a new version.
type mrCassette struct {
	Version      string          `json:"version"`
	Metadata     mrMetadata      `json:"metadata"`
	Interactions []mrInteraction `json:"interactions"`
}

type mrMetadata struct {
	RecordedAt      string          `json:"recorded_at"`
	ServerURL       string          `json:"server_url"`
	ProtocolVersion *string         `json:"protocol_version"`
	ServerInfo      json.RawMessage `json:"server_info"`
	TransportType   string          `json:"transport_type,omitempty"`
}

type mrInteraction struct {
	Type           string          `json:"type"`
	Request        json.RawMessage `json:"request"`
	Response       json.RawMessage `json:"response"`
	ResponseIsSSE  bool            `json:"response_is_sse"`
	ResponseStatus int             `json:"response_status"`
	LatencyMs      float64         `json:"latency_ms"`
	HTTPMethod     *string         `json:"http_method"`
	HTTPPath       *string         `json:"http_path"`
}

// Imported is a recording made into a cassette's header and calls.
type Imported struct {
	Header cassette.Header
	// ToolsLists are the results of the tools/list answered before the first call.
	ToolsLists [][]byte
	Calls      []cassette.Recorded
	// Left says what was not kept, counted: "lifecycle", "notification", a method's name.
	Left map[string]int
}

// maxImport bounds the file an import reads whole (one JSON document).
const maxImport = 64 << 20

// ParseMCPRecorder reads an mcp-recorder cassette: the handshake (initialize, its
// result, notifications/initialized), the tools/list results before the first call,
// and each tools/call with its arguments, result or error as the file has them.
// The interactions are decoded one at a time, each kept only for what is made of it:
// decoded whole, a 60 MB file of "{}" interactions took 7.6 GB
// (TestCassetteImportManyInteractionsMemoryBound).
func ParseMCPRecorder(data []byte) (*Imported, error) {
	var mr mrCassette
	im := &Imported{Left: map[string]int{}}
	sawInteractions := false
	var callErr error // the first interaction that does not read; said after the version
	bad := func(err error) (*Imported, error) {
		return nil, fmt.Errorf("not an mcp-recorder cassette: %w", err)
	}
	// Lexed in place (iteratively, any depth), each interaction decoded on its own:
	// json.Decoder kept copies of the file in its buffer.
	if !jsonlex.Valid(data) {
		return bad(errors.New("not valid JSON"))
	}
	start := jsonlex.SkipSpace(data, 0)
	if start >= len(data) || data[start] != '{' {
		return bad(errors.New("not a JSON object"))
	}
	var err error
	jsonlex.EachMember(data, start, func(m jsonlex.Member) bool {
		k, v := data[m.Key.Start:m.Key.End], data[m.Value.Start:m.Value.End]
		switch {
		case jsonlex.KeyIs(k, "version"):
			mr.Version = ""
			err = json.Unmarshal(v, &mr.Version)
		case jsonlex.KeyIs(k, "metadata"):
			mr.Metadata = mrMetadata{}
			err = json.Unmarshal(v, &mr.Metadata)
		case jsonlex.KeyIs(k, "interactions"):
			// The last of a duplicated key wins, as in json.Unmarshal.
			im, sawInteractions, callErr = &Imported{Left: map[string]int{}}, false, nil
			switch v[0] {
			case 'n':
				return true // null: no list
			case '[':
			default:
				err = errors.New("\"interactions\" is not a list")
				return false
			}
			sawInteractions = true
			i := 0
			jsonlex.EachElement(v, func(el []byte) {
				if err != nil {
					return
				}
				var it mrInteraction
				if err = json.Unmarshal(el, &it); err == nil && callErr == nil {
					callErr = im.add(i, it)
				}
				i++
			})
		}
		return err == nil
	})
	if err != nil {
		return bad(err)
	}
	if !sawInteractions {
		return nil, errors.New("not an mcp-recorder cassette: no \"interactions\" list")
	}
	if major, _, _ := strings.Cut(mr.Version, "."); major != "1" {
		return nil, fmt.Errorf("an mcp-recorder cassette version %q: this bir-proxy reads version 1", mr.Version)
	}
	if callErr != nil {
		return nil, callErr
	}
	h := &im.Header
	if h.Era == "" {
		h.Era = cassette.EraUnknown
	}
	h.Server = jsonlex.StringOf(jsonlex.Get(mr.Metadata.ServerInfo, "name"))
	if t, err := time.Parse(time.RFC3339Nano, mr.Metadata.RecordedAt); err == nil {
		h.RecordedAt = t
	}
	for i := range im.Calls {
		im.Calls[i].StartedAt = h.RecordedAt
	}
	switch u := mr.Metadata.ServerURL; {
	case strings.HasPrefix(u, "stdio://"):
		h.Command = redact.CommandLine(strings.Fields(strings.TrimPrefix(u, "stdio://")))
	case u != "":
		h.URL = redact.URL(u)
	}
	if h.ProtocolVersion == "" && mr.Metadata.ProtocolVersion != nil {
		h.ProtocolVersion = *mr.Metadata.ProtocolVersion
	}
	return im, nil
}

// add takes interaction i (from 0).
func (im *Imported) add(i int, it mrInteraction) error {
	h := &im.Header
	if it.Type == "lifecycle" || len(it.Request) == 0 || string(it.Request) == "null" {
		im.Left[it.Type]++
		return nil
	}
	method := jsonlex.StringOf(jsonlex.Get(it.Request, "method"))
	params := jsonlex.Get(it.Request, "params")
	result := jsonlex.Get(it.Response, "result")
	rpcErr := jsonlex.Get(it.Response, "error")
	switch {
	case method == "initialize" && h.Initialize == nil:
		if params == nil || params[0] != '{' {
			return fmt.Errorf("interaction %d: an initialize without params", i+1)
		}
		// Decode copied each interaction's bytes: views into them are owned.
		h.Initialize, h.Era = params, cassette.EraSession
		if result != nil && result[0] == '{' {
			h.InitializeResult = result
			h.ProtocolVersion = jsonlex.StringOf(jsonlex.Get(result, "protocolVersion"))
		}
	case method == "notifications/initialized":
		h.Initialized = h.Initialize != nil
	case method == "tools/list" && len(im.Calls) == 0 && result != nil:
		im.ToolsLists = append(im.ToolsLists, result)
	case method == "tools/call":
		name := jsonlex.Get(params, "name")
		if name == nil || name[0] != '"' {
			return fmt.Errorf("interaction %d: a tools/call without a tool name", i+1)
		}
		// StartedAt is the metadata's recorded_at, set once the whole file is read.
		r := cassette.Recorded{Tool: jsonlex.StringOf(name),
			Duration: time.Duration(it.LatencyMs * float64(time.Millisecond))}
		if a := jsonlex.Get(params, "arguments"); a != nil {
			r.Arguments = a
		}
		switch {
		case rpcErr != nil:
			r.Error, r.Outcome = rpcErr, "rpc_error"
		case result != nil:
			r.Result, r.Outcome = result, "ok"
			if string(jsonlex.Get(result, "isError")) == "true" {
				r.Outcome = "tool_error"
			}
		default:
			r.Outcome = "upstream_lost" // no answer recorded
		}
		im.Calls = append(im.Calls, r)
	default:
		im.Left[orNone(method)]++
	}
	return nil
}

func orNone(m string) string {
	if m == "" {
		return "a message without a method"
	}
	return m
}

// ExportMCPRecorder makes a bir cassette into an mcp-recorder cassette: the handshake
// (session era), the tools the header keeps as one tools/list, each call replayable
// (redacted calls are left out, counted in left) as a tools/call with ids 1, 2, ...
func ExportMCPRecorder(h *cassette.Header, next func() (*cassette.Call, error)) (out []byte, calls, left int, err error) {
	mr := mrCassette{Version: "1.0", Interactions: []mrInteraction{}}
	mr.Metadata.RecordedAt = h.RecordedAt.UTC().Format("2006-01-02T15:04:05.000000+00:00")
	if h.URL != "" {
		mr.Metadata.ServerURL, mr.Metadata.TransportType = h.URL, "http"
	} else if len(h.Command) > 0 {
		mr.Metadata.ServerURL, mr.Metadata.TransportType = "stdio://"+strings.Join(h.Command, " "), "stdio"
	}
	if h.ProtocolVersion != "" {
		v := h.ProtocolVersion
		mr.Metadata.ProtocolVersion = &v
	}
	if si := jsonlex.Get(h.InitializeResult, "serverInfo"); si != nil {
		mr.Metadata.ServerInfo = si
	}
	id := 0
	req := func(method string, params []byte, withID bool) json.RawMessage {
		b := []byte(`{"jsonrpc":"2.0"`)
		if withID {
			b = append(b, `,"id":`...)
			b = fmt.Appendf(b, "%d", id)
		}
		b = append(b, `,"method":`...)
		b = jsonlex.AppendString(b, method)
		if params != nil {
			b = append(append(b, `,"params":`...), params...)
		}
		return append(b, '}')
	}
	resp := func(member string, v []byte) json.RawMessage {
		return json.RawMessage(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,%q:%s}`, id, member, v))
	}
	if h.Initialize != nil {
		it := mrInteraction{Type: "jsonrpc_request", Request: req("initialize", h.Initialize, true), ResponseStatus: 200}
		if h.InitializeResult != nil {
			it.Response = resp("result", h.InitializeResult)
		}
		mr.Interactions = append(mr.Interactions, it)
		id++
		mr.Interactions = append(mr.Interactions, mrInteraction{Type: "notification", Request: req("notifications/initialized", nil, false), ResponseStatus: 202})
	}
	if h.Tools != nil {
		mr.Interactions = append(mr.Interactions, mrInteraction{Type: "jsonrpc_request", Request: req("tools/list", nil, true),
			Response: resp("result", append(append([]byte(`{"tools":`), h.Tools...), '}')), ResponseStatus: 200})
		id++
	}
	for {
		c, err := next()
		if err != nil {
			if errors.Is(err, errEnd) {
				break
			}
			return nil, 0, 0, err
		}
		if c.Redacted || c.TooLarge > 0 {
			left++ // its arguments are not the ones sent (or were not kept)
			continue
		}
		params := append([]byte(`{"name":`), jsonlex.AppendString(nil, c.Tool)...)
		if c.Arguments != nil {
			params = append(append(params, `,"arguments":`...), c.Arguments...)
		}
		params = append(params, '}')
		it := mrInteraction{Type: "jsonrpc_request", Request: req("tools/call", params, true), ResponseStatus: 200,
			LatencyMs: float64(int64(c.DurationMs + 0.5))}
		switch {
		case c.Error != nil:
			it.Response = resp("error", c.Error)
		case c.Result != nil:
			it.Response = resp("result", c.Result)
		}
		mr.Interactions = append(mr.Interactions, it)
		id++
		calls++
	}
	out, err = json.MarshalIndent(mr, "", "  ")
	if err != nil {
		return nil, 0, 0, err
	}
	return append(out, '\n'), calls, left, nil
}

// errEnd ends the calls ExportMCPRecorder is given.
var errEnd = errors.New("end")
