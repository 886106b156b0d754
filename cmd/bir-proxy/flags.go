package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/bir-dev/bir-proxy/toolpolicy"
)

// sizeFlag is a flag holding a size in bytes, written as a number with an optional unit
// (B, K, M, G, T, with or without "iB"/"B", any case; powers of 1024): 256MiB, 1g, 1.5G,
// 300000.
type sizeFlag struct{ n int64 }

func (s *sizeFlag) String() string { return formatSize(s.n) }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	s.n = n
	return nil
}

// parseSize reads a size as sizeFlag describes it.
func parseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	if num == "" {
		return 0, fmt.Errorf("%q is not a size (e.g. 256MiB)", v)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 256MiB)", v)
	}
	mult := float64(1)
	switch strings.TrimSuffix(strings.TrimSuffix(unit, "b"), "i") {
	case "":
	case "k":
		mult = 1 << 10
	case "m":
		mult = 1 << 20
	case "g":
		mult = 1 << 30
	case "t":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("%q: unknown unit %q (B, KiB, MiB, GiB, TiB)", v, s[i:])
	}
	if unit == "i" || unit == "ib" && mult == 1 {
		return 0, fmt.Errorf("%q: unknown unit %q (B, KiB, MiB, GiB, TiB)", v, s[i:])
	}
	n := f * mult
	if n >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", v)
	}
	return int64(n), nil
}

func formatSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// definePolicyFlags defines the flags of the tool policy (toolpolicy.Policy): with
// none of them given, the policy changes nothing.
func definePolicyFlags(fs *flag.FlagSet) *toolpolicy.Policy {
	p := &toolpolicy.Policy{}
	fs.Var((*repeated)(&p.Ignore), "ignore-tool", "hide the tools whose names match `PATTERN` (* for any run of characters, case ignored) from the host, and refuse their calls (repeatable)")
	fs.Var((*repeated)(&p.Allow), "allow-tool", "show the host only the tools whose names match `PATTERN`, and refuse the others' calls (repeatable)")
	fs.DurationVar(&p.CallTimeout, "call-timeout", 0, "answer a tools/call still running after `DURATION` with an error, and cancel it on the server (default: no deadline)")
	fs.BoolVar(&p.ResetOnProgress, "call-timeout-reset-on-progress", false, "with --call-timeout: each progress notification of a call starts its deadline again")
	return p
}
