package pins

// Changes compares two definitions of one tool, each a tool object as a server
// listed it, as pins compare them (docs/pins.md, "What is compared"): every member
// but name and _meta, as JSON values, annotations with the MCP defaults filled in.
// It returns the top-level members that differ, sorted (nil when none; past the
// first 16 members the rest are one, "(other members)"). A definition that is not a
// tool object (no string name) differs from any other as "(definition)". `bir-proxy
// verify` uses it for its definition_drift (docs/verify.md).
func Changes(recorded, current []byte) []string {
	r := newReader()
	a, okA := r.read(recorded)
	b, okB := r.read(current)
	switch {
	case !okA && !okB:
		return nil
	case !okA || !okB:
		return []string{"(definition)"}
	case a.Body == b.Body:
		return nil
	}
	return changedMembers(a, b)
}
