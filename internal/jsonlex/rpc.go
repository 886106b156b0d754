package jsonlex

import "strconv"

// EachRPC calls f for each object on a line — the message, each object element of a
// batch, and so for every value on the line — with its JSON-RPC members, reading each
// object once. It is the pumps' per-message look (TopFields would read an object a
// second time after EachMessage found its end). It allocates nothing for a line that
// holds one object.
func EachRPC(line []byte, f func(obj []byte, fl Fields)) {
	for i := SkipSpace(line, 0); i < len(line); {
		var end int
		switch line[i] {
		case '{':
			fl, e, ok := fieldsAt(line, i)
			if !ok {
				return
			}
			f(line[i:e], fl)
			end = e
		case '[':
			elems, ok := Elements(line, i)
			if !ok {
				return
			}
			for _, el := range elems {
				if line[el.Start] == '{' {
					if fl, _, ok := fieldsAt(line, el.Start); ok {
						f(line[el.Start:el.End], fl)
					}
				}
			}
			end = SkipValue(line, i)
		default:
			end = SkipValue(line, i)
		}
		if end < 0 {
			return
		}
		i = SkipSpace(line, end)
	}
}

// fieldsAt is TopFields for the object at b[i], also returning where it ends.
func fieldsAt(b []byte, i int) (f Fields, end int, ok bool) {
	end, ok = EachMember(b, i, func(mb Member) bool {
		k := b[mb.Key.Start:mb.Key.End]
		v := b[mb.Value.Start:mb.Value.End]
		if c := k[1]; c != '\\' && (c < 'e' || c > 'r') {
			return true // no member read here starts so: skip the five comparisons
		}
		switch {
		case KeyIs(k, "id"):
			f.ID = v
		case KeyIs(k, "method"):
			f.Method = v
		case KeyIs(k, "params"):
			f.Params = v
		case KeyIs(k, "result"):
			f.Result = v
		case KeyIs(k, "error"):
			f.Error = v
		}
		return true
	})
	if !ok {
		return Fields{}, 0, false
	}
	return f, end, true
}

// ErrorResponse is a JSON-RPC error answer to the request with the raw id.
func ErrorResponse(id []byte, code int, message string) []byte {
	b := make([]byte, 0, 64+len(id)+len(message))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, message)
	return append(b, `}}`...)
}
