package mcpconfig

import "strings"

// policyFlags are the proxy's tool-policy flags (toolpolicy, pins), which status shows
// per server, and --mock (wrap --mock: the entry answers from a cassette, and its
// server is not started); the value-less ones are last, from valueless on.
var policyFlags = []string{"ignore-tool", "allow-tool", "call-timeout", "pin-tools", "mock", "call-timeout-reset-on-progress", "read-only"}

// valueless is the index in policyFlags of the first flag that takes no value.
const valueless = 5

// policyArgs are the tool-policy flags a wrapped entry gives the proxy, each as
// "--flag value", in order; nil for none or an entry that is not wrapped.
func (e entry) policyArgs() []string {
	if e.kind != KindWrapped && e.kind != KindWrappedRemote {
		return nil
	}
	end := len(e.argv)
	if e.kind == KindWrapped {
		end = e.cmdAt
	}
	var out []string
	for i := 0; i < end; i++ {
		a := e.argv[i].value.Str
		if a == "--" {
			break
		}
		name, value, eq := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") {
			continue
		}
		for j, f := range policyFlags {
			if name != f {
				continue
			}
			switch {
			case j >= valueless:
				out = append(out, "--"+f)
			case eq:
				out = append(out, "--"+f+" "+value)
			case i+1 < end:
				i++
				out = append(out, "--"+f+" "+e.argv[i].value.Str)
			}
		}
		if !eq && TakesValue(name) && !isPolicyFlag(name) {
			i++ // another flag's value, which could look like one of these
		}
	}
	return out
}

func isPolicyFlag(name string) bool {
	for _, f := range policyFlags {
		if f == name {
			return true
		}
	}
	return false
}
