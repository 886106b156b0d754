package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bir-dev/bir-proxy/budget"
	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/relay"
	"github.com/bir-dev/bir-proxy/toolpolicy"
)

// defaultResultTokens is --max-result-tokens auto's budget when the host sets no
// MAX_MCP_OUTPUT_TOKENS: Claude Code's default.
const defaultResultTokens = 25000

// defineBudgetFlag defines --max-result-tokens (docs/budget.md) into s.
func defineBudgetFlag(fs *flag.FlagSet, s *string, env bool) {
	def := ""
	if env {
		def = os.Getenv("BIR_MAX_RESULT_TOKENS")
	}
	fs.StringVar(s, "max-result-tokens", def, "cut a tool's result longer than `N` tokens (4×N bytes) before the host gets it, keeping the whole answer in a spill file; auto: $MAX_MCP_OUTPUT_TOKENS, else 25000 (env BIR_MAX_RESULT_TOKENS; default: off)")
}

// resultTokens reads --max-result-tokens: 0 for off.
func resultTokens(v string) (int, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "", "0", "off":
		return 0, nil
	case "auto":
		if m := strings.TrimSpace(os.Getenv("MAX_MCP_OUTPUT_TOKENS")); m != "" {
			if n, err := strconv.Atoi(m); err == nil && n > 0 {
				return n, nil
			}
		}
		return defaultResultTokens, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1<<28 {
		return 0, fmt.Errorf("--max-result-tokens %q: want a number of tokens, auto or off", v)
	}
	return n, nil
}

// plugBudget gives p the result budget of tokens (none for 0): its Answer hook;
// trimmed is told each answer cut, for its report. It returns what cuts a long answer
// as it streams (relay.ToolPolicyCutting), nil for none.
func plugBudget(p *toolpolicy.Policy, tokens int, trimmed func(id []byte, spill string), log *slog.Logger) func(id []byte) relay.AnswerCut {
	if tokens <= 0 {
		return nil
	}
	b := &budget.Budget{Bytes: 4 * tokens, Cut: trimmed}
	if dir, err := statedir.Dir(); err == nil {
		b.Spill = budget.NewSpill(filepath.Join(dir, "spill"), log)
	} else {
		log.Warn("bir-proxy: cut answers will not be kept whole", "err", err)
	}
	p.Answer = b.Answer
	return func(id []byte) relay.AnswerCut {
		if sc := b.StreamCut(id); sc != nil {
			return sc
		}
		return nil // (not a typed nil)
	}
}
