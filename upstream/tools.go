package upstream

import "github.com/bir-dev/bir-proxy/internal/jsonlex"

// ToolNames are the names of the tools in tools, a tools/list result's "tools" array,
// in order, read as the host's JSON.parse reads them (the last of duplicate members
// wins); an element that is not an object with a string "name" names none, and an
// array whose structure breaks names none at all. Interception (what the recorder is
// told) and revive (what a revived server's list is compared with) both read the
// names here, so for a list with duplicate keys the two agree.
func ToolNames(tools []byte) []string {
	names := []string{}
	elems, _ := jsonlex.Elements(tools, jsonlex.SkipSpace(tools, 0))
	for _, e := range elems {
		if name := jsonlex.Get(tools[e.Start:e.End], "name"); len(name) > 0 && name[0] == '"' {
			names = append(names, jsonlex.StringOf(name))
		}
	}
	return names
}
