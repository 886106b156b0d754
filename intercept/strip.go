package intercept

// DefaultCorrelationKey is the argument a host hook adds to each tools/call (SPEC §3.1).
const DefaultCorrelationKey = "_bir_call_id"

// interest says what bookkeeping wants to know about a host message.
type interest uint8

const (
	wantCall      interest = 1 << iota // a tools/call request: becomes a report
	wantCancel                         // notifications/cancelled: may end a call
	wantHandshake                      // initialize, tools/list, server/discover: facts for register
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
	var sc hostScan
	var dels []span
	// A line should hold one value, but a server reading stdin with a streaming
	// decoder would act on a second one too, so every value on the line is looked at.
	for i := skipSpace(msg, 0); i < len(msg); {
		end := skipValue(msg, i)
		if end < 0 {
			break
		}
		switch msg[i] {
		case '{':
			dels = scanRequest(msg, i, key, &sc, dels)
		case '[':
			elems, ok := elements(msg, i)
			if !ok {
				break
			}
			for _, e := range elems {
				if msg[e.start] == '{' {
					dels = scanRequest(msg, e.start, key, &sc, dels)
				}
			}
		}
		i = skipSpace(msg, end)
	}
	return splice(msg, dels), sc
}

// scanRequest looks at the object at msg[i] and appends the spans to delete.
func scanRequest(msg []byte, i int, key string, sc *hostScan, dels []span) []span {
	// The method the upstream acts on is the last "method" member (JSON parsers keep
	// the last duplicate), and bookkeeping follows it; but the key is removed if any
	// "method" member says tools/call, so no parser, whatever it does with
	// duplicates, can see it.
	anyCall, hasID := false, false
	var method []byte
	var paramsBuf [2]span
	params := paramsBuf[:0]
	_, ok := eachMember(msg, i, func(m member) bool {
		k := msg[m.key.start:m.key.end]
		switch {
		case keyIs(k, "params"):
			if msg[m.value.start] == '{' {
				params = append(params, m.value)
			}
		case keyIs(k, "method"):
			method = msg[m.value.start:m.value.end]
			anyCall = anyCall || keyIs(method, "tools/call")
		case keyIs(k, "id"):
			hasID = true
		}
		return true
	})
	if !ok {
		return dels
	}
	switch {
	case method == nil:
	case keyIs(method, "tools/call"):
		sc.want |= wantCall
		sc.awaiting++
		if !hasID {
			sc.ends = true // a notification: no answer will come to end it
		}
	case keyIs(method, "notifications/cancelled"):
		sc.want |= wantCancel
		sc.ends = true
	case keyIs(method, "initialize"), keyIs(method, "tools/list"), keyIs(method, "server/discover"):
		sc.want |= wantHandshake
		if hasID {
			sc.awaiting++
		}
	}
	if !anyCall {
		return dels
	}
	var callID *string
	var argsBuf [16]member
	for _, p := range params {
		eachMember(msg, p.start, func(a member) bool {
			if !keyIs(msg[a.key.start:a.key.end], "arguments") || msg[a.value.start] != '{' {
				return true
			}
			ams := argsBuf[:0]
			if _, ok := eachMember(msg, a.value.start, func(m member) bool {
				ams = append(ams, m)
				return true
			}); !ok {
				return true
			}
			var id *string
			dels, id = deleteKey(msg, ams, key, dels)
			if id != nil {
				callID = id // the last occurrence wins, as in the host's JSON.parse
			}
			return true
		})
	}
	if keyIs(method, "tools/call") {
		sc.callIDs = append(sc.callIDs, callID)
	}
	return dels
}

// deleteKey appends the spans that remove every member of ams named key, together
// with the separators that would otherwise be left dangling, and returns the value of
// the last such member.
func deleteKey(msg []byte, ams []member, key string, dels []span) ([]span, *string) {
	var callID *string
	n := len(ams)
	for a := 0; a < n; {
		if !keyIs(msg[ams[a].key.start:ams[a].key.end], key) {
			a++
			continue
		}
		// A run of removed members a..b-1.
		b := a
		for b < n && keyIs(msg[ams[b].key.start:ams[b].key.end], key) {
			callID = valueText(msg, ams[b].value)
			b++
		}
		switch {
		case b < n:
			// A kept member follows: remove up to its key, taking our commas.
			dels = append(dels, span{ams[a].key.start, ams[b].key.start})
		case a > 0:
			// The run ends the object: remove from the end of the kept member before
			// it, taking the comma that separated them.
			dels = append(dels, span{ams[a-1].value.end, ams[n-1].value.end})
		default:
			// Every member goes: "{ ... }" keeps only its braces and outer spacing.
			dels = append(dels, span{ams[0].key.start, ams[n-1].value.end})
		}
		a = b
	}
	return dels, callID
}

// valueText is the correlation value: a string decoded, anything else as its JSON text.
func valueText(msg []byte, v span) *string {
	lit := msg[v.start:v.end]
	if lit[0] == '"' {
		if s, ok := decodeString(lit); ok {
			return &s
		}
	}
	s := string(lit)
	return &s
}

// splice deletes the sorted, disjoint spans from msg in place.
func splice(msg []byte, dels []span) []byte {
	if len(dels) == 0 {
		return msg
	}
	w := dels[0].start
	for i, d := range dels {
		next := len(msg)
		if i+1 < len(dels) {
			next = dels[i+1].start
		}
		w += copy(msg[w:], msg[d.end:next])
	}
	return msg[:w]
}
