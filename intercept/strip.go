package intercept

import "github.com/bir-dev/bir-proxy/internal/jsonlex"

// DefaultCorrelationKey is the argument a host hook adds to each tools/call (SPEC §3.1).
const DefaultCorrelationKey = "_bir_call_id"

// interest says what bookkeeping wants to know about a host message.
type interest uint8

const (
	wantCall      interest = 1 << iota // a tools/call request: becomes a report
	wantCancel                         // notifications/cancelled: may end a call
	wantHandshake                      // initialize, tools/list, server/discover: facts for register
	wantTask                           // tasks/get, tasks/result, tasks/cancel: may end a task (later.go)
)

// hostScan is what the host path learned about one message.
type hostScan struct {
	want interest
	// awaiting counts the requests in the message whose answers bookkeeping wants:
	// each tools/call and each handshake request with an id.
	awaiting int64
	// ends says the message may end a call by itself (a cancel, a tools/call that is a
	// notification), so bookkeeping should look soon even with no answer to follow.
	ends bool
	// callIDs holds, per tools/call request in message order (one, or several in a
	// batch), the removed correlation value: the string, or the JSON text of a
	// non-string value; nil when the call carried none.
	callIDs []*string
}

// strip removes every top-level member of params.arguments named key from each
// tools/call request in msg (a single message or a batch), in place, and says what
// the message holds. Every other byte stays as it was. A message it cannot follow is
// returned unchanged: the upstream answers it with a parse error, which is the
// host's business.
func strip(msg []byte, key string) ([]byte, hostScan) {
	var lx jsonlex.Line
	lx.Lex(msg)
	return stripLexed(msg, key, &lx, true)
}

// stripLexed is strip of a message the caller lexed into lx (the host's path lexes
// each message once, for every reader of it); lx then describes the bytes returned.
// ids says whether the removed values are wanted (hostScan.callIDs): only bookkeeping
// reads them, and a pure pipe need not allocate them.
func stripLexed(msg []byte, key string, lx *jsonlex.Line, ids bool) ([]byte, hostScan) {
	var sc hostScan
	var delsBuf [4]jsonlex.Span
	dels := delsBuf[:0]
	// A line should hold one value, but a server reading stdin with a streaming
	// decoder would act on a second one too, so every object on the line is looked at.
	for i := range lx.Objs {
		o := &lx.Objs[i]
		if o.Recheck {
			dels = scanRequest(msg, o.Start, key, &sc, dels, ids)
			continue
		}
		dels = scanLexed(msg, lx, o, key, &sc, dels, ids)
	}
	if len(dels) == 0 {
		return msg, sc
	}
	out := splice(msg, dels)
	lx.Shift(dels)
	return out, sc
}

// classify notes in sc what bookkeeping wants of a message whose (last) method is
// method, with or without an id; it reports whether it is a tools/call.
func classify(method []byte, hasID bool, sc *hostScan) (call bool) {
	switch {
	case method == nil:
	case jsonlex.KeyIs(method, "tools/call"):
		sc.want |= wantCall
		sc.awaiting++
		if !hasID {
			sc.ends = true // a notification: no answer will come to end it
		}
		return true
	case jsonlex.KeyIs(method, "notifications/cancelled"):
		sc.want |= wantCancel
		sc.ends = true
	case jsonlex.KeyIs(method, "initialize"), jsonlex.KeyIs(method, "tools/list"), jsonlex.KeyIs(method, "server/discover"):
		sc.want |= wantHandshake
		if hasID {
			sc.awaiting++
		}
	case isTaskMethod(method):
		// Queued whatever bookkeeping knows of tasks: the host can ask for a task
		// before bookkeeping has seen the answer that made it (the relay writes an
		// answer to the host before it offers it to bookkeeping).
		if hasID {
			sc.want |= wantTask
			sc.awaiting++
		}
	}
	return false
}

// scanLexed is scanRequest for an object with one method, one params and in it one
// arguments member at most, read from its lex alone: the method the upstream acts on
// is the only one there is, and the lex has the members of the arguments.
func scanLexed(msg []byte, lx *jsonlex.Line, o *jsonlex.Obj, key string, sc *hostScan, dels []jsonlex.Span, ids bool) []jsonlex.Span {
	f := o.Fields(msg)
	if !classify(f.Method, f.ID != nil, sc) {
		return dels
	}
	var callID *string
	if args := lx.Arguments(o); len(args) > 0 {
		var v jsonlex.Span
		var found bool
		if dels, v, found = deleteKey(msg, args, key, dels); found && ids {
			callID = valueText(msg, v)
		}
	}
	if ids {
		sc.callIDs = append(sc.callIDs, callID)
	}
	return dels
}

// scanRequest looks at the object at msg[i], which the lex left to its readers
// (jsonlex.Obj.Recheck: duplicate members, say), and appends the spans to delete.
func scanRequest(msg []byte, i int, key string, sc *hostScan, dels []jsonlex.Span, ids bool) []jsonlex.Span {
	// The method the upstream acts on is the last "method" member (JSON parsers keep
	// the last duplicate), and bookkeeping follows it; but the key is removed if any
	// "method" member says tools/call, so no parser, whatever it does with
	// duplicates, can see it.
	anyCall, hasID := false, false
	var method []byte
	var paramsBuf [2]jsonlex.Span
	params := paramsBuf[:0]
	_, ok := jsonlex.EachMember(msg, i, func(m jsonlex.Member) bool {
		k := msg[m.Key.Start:m.Key.End]
		switch {
		case jsonlex.KeyIs(k, "params"):
			if msg[m.Value.Start] == '{' {
				params = append(params, m.Value)
			}
		case jsonlex.KeyIs(k, "method"):
			method = msg[m.Value.Start:m.Value.End]
			anyCall = anyCall || jsonlex.KeyIs(method, "tools/call")
		case jsonlex.KeyIs(k, "id"):
			hasID = true
		}
		return true
	})
	if !ok {
		return dels
	}
	call := classify(method, hasID, sc)
	if !anyCall {
		return dels
	}
	var last jsonlex.Span
	var found bool
	for _, p := range params {
		var v jsonlex.Span
		var ok bool
		if dels, v, ok = stripParams(msg, p.Start, key, dels); ok {
			last, found = v, true // the last occurrence wins, as in the host's JSON.parse
		}
	}
	if call && ids {
		var callID *string
		if found {
			callID = valueText(msg, last)
		}
		sc.callIDs = append(sc.callIDs, callID)
	}
	return dels
}

// stripParams appends the spans that remove the key from every object-valued
// "arguments" member of the params object at msg[i]; v is the value of the last
// member removed, found false when there was none.
func stripParams(msg []byte, i int, key string, dels []jsonlex.Span) (_ []jsonlex.Span, v jsonlex.Span, found bool) {
	var argsBuf [16]jsonlex.Member
	jsonlex.EachMember(msg, i, func(a jsonlex.Member) bool {
		if !jsonlex.KeyIs(msg[a.Key.Start:a.Key.End], "arguments") || msg[a.Value.Start] != '{' {
			return true
		}
		ams := argsBuf[:0]
		if _, ok := jsonlex.EachMember(msg, a.Value.Start, func(m jsonlex.Member) bool {
			ams = append(ams, m)
			return true
		}); !ok {
			return true
		}
		var last jsonlex.Span
		var ok bool
		if dels, last, ok = deleteKey(msg, ams, key, dels); ok {
			v, found = last, true
		}
		return true
	})
	return dels, v, found
}

// deleteKey appends the spans that remove every member of ams named key, together
// with the separators that would otherwise be left dangling, and returns the value of
// the last such member (found false when there was none).
func deleteKey(msg []byte, ams []jsonlex.Member, key string, dels []jsonlex.Span) (_ []jsonlex.Span, v jsonlex.Span, found bool) {
	n := len(ams)
	for a := 0; a < n; {
		if !jsonlex.KeyIs(msg[ams[a].Key.Start:ams[a].Key.End], key) {
			a++
			continue
		}
		// A run of removed members a..b-1.
		b := a
		for b < n && jsonlex.KeyIs(msg[ams[b].Key.Start:ams[b].Key.End], key) {
			v, found = ams[b].Value, true
			b++
		}
		switch {
		case b < n:
			// A kept member follows: remove up to its key, taking our commas.
			dels = append(dels, jsonlex.Span{Start: ams[a].Key.Start, End: ams[b].Key.Start})
		case a > 0:
			// The run ends the object: remove from the end of the kept member before
			// it, taking the comma that separated them.
			dels = append(dels, jsonlex.Span{Start: ams[a-1].Value.End, End: ams[n-1].Value.End})
		default:
			// Every member goes: "{ ... }" keeps only its braces and outer spacing.
			dels = append(dels, jsonlex.Span{Start: ams[0].Key.Start, End: ams[n-1].Value.End})
		}
		a = b
	}
	return dels, v, found
}

// valueText is the correlation value: a string decoded, anything else as its JSON text.
func valueText(msg []byte, v jsonlex.Span) *string {
	lit := msg[v.Start:v.End]
	if lit[0] == '"' {
		if s, ok := jsonlex.DecodeString(lit); ok {
			return &s
		}
	}
	s := string(lit)
	return &s
}

// splice deletes the sorted, disjoint spans from msg in place.
func splice(msg []byte, dels []jsonlex.Span) []byte {
	if len(dels) == 0 {
		return msg
	}
	w := dels[0].Start
	for i, d := range dels {
		next := len(msg)
		if i+1 < len(dels) {
			next = dels[i+1].Start
		}
		w += copy(msg[w:], msg[d.End:next])
	}
	return msg[:w]
}
