package pins

import (
	"slices"
	"sort"
)

// The statuses of a tool against its server's pins.
const (
	StatusPinned  = "pinned"  // as pinned
	StatusChanged = "changed" // pinned, and its definition differs (Changed says where)
	StatusNew     = "new"     // not pinned
	StatusRemoved = "removed" // pinned, and a complete listing no longer has it
	StatusRenamed = "renamed" // a removed pin's definition under a new name (From)
)

// Status is one tool's standing.
type Status struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Changed []string `json:"changed,omitempty"`
	From    string   `json:"from,omitempty"`
	Bytes   int      `json:"bytes"`
}

// Drifted says the tool is not as the user approved it: block mode hides it.
func (s Status) Drifted() bool {
	return s.Status == StatusChanged || s.Status == StatusNew || s.Status == StatusRenamed
}

// Compare gives each tool of a listing (and, when the listing is complete, each pin
// it lacks) its status against pinned, in the listing's order, removed ones last.
func Compare(pinned map[string]Def, listed []Def, complete bool) []Status {
	out := make([]Status, 0, len(listed))
	inListing := make(map[string]bool, len(listed))
	for _, d := range listed {
		inListing[d.Name] = true
	}
	// Removed pins, by body, for renames: only from a complete listing.
	removed := map[string][]string{}
	if complete {
		for name, p := range pinned {
			if !inListing[name] {
				removed[p.Body] = append(removed[p.Body], name)
			}
		}
		for _, names := range removed {
			sort.Strings(names)
		}
	}
	renamedFrom := map[string]bool{}
	for _, d := range listed {
		st := Status{Name: d.Name, Bytes: d.Bytes}
		p, ok := pinned[d.Name]
		switch {
		case ok && p.Body == d.Body:
			st.Status = StatusPinned
		case ok:
			st.Status, st.Changed = StatusChanged, changedMembers(p, d)
		case len(removed[d.Body]) > 0:
			st.Status, st.From = StatusRenamed, removed[d.Body][0]
			renamedFrom[st.From] = true
			removed[d.Body] = removed[d.Body][1:]
		default:
			st.Status = StatusNew
		}
		out = append(out, st)
	}
	if complete {
		var gone []string
		for name := range pinned {
			if !inListing[name] && !renamedFrom[name] {
				gone = append(gone, name)
			}
		}
		sort.Strings(gone)
		for _, name := range gone {
			out = append(out, Status{Name: name, Status: StatusRemoved, Bytes: pinned[name].Bytes})
		}
	}
	return out
}

// changedMembers are the top-level members whose values differ, sorted.
func changedMembers(a, b Def) []string {
	var out []string
	for k, h := range a.Members {
		if b.Members[k] != h {
			out = append(out, k)
		}
	}
	for k := range b.Members {
		if _, ok := a.Members[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
