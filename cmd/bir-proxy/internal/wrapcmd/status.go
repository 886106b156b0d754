package wrapcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bir-dev/bir-proxy/internal/statedir"
	"github.com/bir-dev/bir-proxy/internal/termtext"
	"github.com/bir-dev/bir-proxy/internal/version"
	"github.com/bir-dev/bir-proxy/journal"
	"github.com/bir-dev/bir-proxy/mcpconfig"
	"github.com/bir-dev/bir-proxy/recorder"
	"github.com/bir-dev/bir-proxy/redact"
	"github.com/bir-dev/bir-proxy/servername"
	"github.com/bir-dev/bir-proxy/telemetry"
)

// status lists every entry of every file in play, checks the bir-proxy each wrapped
// one runs (and with --check, starts it), then says where reports go.
func (c *cmd) status(ctx context.Context) int {
	c.knowFiles(c.Backups())
	ts, err := c.sel.Targets()
	if err != nil {
		fmt.Fprintf(c.Stderr, "bir-proxy status: %v\n", err)
		return 1
	}
	status := 0
	var loadErrs []string
	ls, err := c.load(ts)
	if err != nil {
		if !c.JSON {
			fmt.Fprintf(c.Stderr, "bir-proxy status: %v\n", err)
		}
		loadErrs = strings.Split(err.Error(), "\n")
		status = 1
	}
	checks := map[string]proxyCheck{}
	// The names the servers of these files report as: their telemetry is shown, not
	// every server's on the machine (issue 40: status in one project listed another's).
	names := map[string]bool{}
	report := Report{Entries: []Entry{}, Errors: loadErrs}
	for _, l := range ls {
		servers := l.Doc.Servers()
		for _, s := range servers {
			for _, n := range reportNames(s) {
				names[n] = true
			}
			if s.Kind == mcpconfig.KindWrapped || s.Kind == mcpconfig.KindWrappedRemote {
				if _, done := checks[s.ProxyCommand]; !done {
					v, err := c.ProxyRuns(ctx, s.ProxyCommand)
					checks[s.ProxyCommand] = proxyCheck{v, err}
				}
			}
			if s.Broken != "" {
				status = 1
			}
		}
		var started map[int]EntryCheck
		if c.Check {
			started = checkEntries(ctx, servers, c.Timeout)
			for _, ch := range started {
				if !ch.OK {
					status = 1
				}
			}
		}
		if c.JSON {
			for i, s := range servers {
				report.Entries = append(report.Entries, newEntry(l, s, checks, started, i))
			}
			continue
		}
		fmt.Fprintln(c.Stdout, termtext.Line(fmt.Sprintf("%s: %s", l.Label(), l.Loc)))
		printServers(c.Stdout, servers, checks)
		if c.Check {
			printChecks(c.Stdout, servers, started)
		}
	}
	cmds := make([]string, 0, len(checks))
	for cmd := range checks {
		cmds = append(cmds, cmd)
	}
	slices.Sort(cmds)
	for _, cmd := range cmds {
		ch := checks[cmd]
		if ch.err != nil {
			status = 1
		}
		report.Proxies = append(report.Proxies, Proxy{Command: cmd, Runs: ch.err == nil, Version: ch.version, Error: errString(ch.err)})
	}
	if c.JSON {
		report.Recorder = c.RecorderStatus(ctx)
		report.Version = "bir-proxy " + version.Get().String()
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			fmt.Fprintf(c.Stderr, "bir-proxy status: %v\n", err)
			return 1
		}
		return status
	}
	if len(ls) == 0 && status == 0 {
		fmt.Fprintln(c.Stdout, noServersHere)
	}
	for _, cmd := range cmds {
		// The command is the file's words, the error and version the command's.
		if ch := checks[cmd]; ch.err != nil {
			fmt.Fprintln(c.Stdout, termtext.Line(fmt.Sprintf("the wrapped entries' %s does not run: %v; run bir-proxy wrap again, or fix the command", cmd, ch.err)))
		} else {
			fmt.Fprintln(c.Stdout, termtext.Line(fmt.Sprintf("the wrapped entries' %s runs: %s", cmd, ch.version)))
		}
	}
	if c.Defaults != nil {
		fmt.Fprint(c.Stdout, c.Defaults())
	}
	fmt.Fprintln(c.Stdout, c.RecorderStatus(ctx))
	if c.All {
		names = nil
	}
	fmt.Fprint(c.Stdout, otelStatus(time.Now(), names))
	// The same words as --version and the registration's version, so a recorder's
	// list of proxies and this line can be compared.
	fmt.Fprintf(c.Stdout, "this bir-proxy: bir-proxy %s\n", version.Get())
	return status
}

// Report is what status --json prints (docs/wrap.md, "status --json").
type Report struct {
	Entries  []Entry  `json:"entries"`
	Proxies  []Proxy  `json:"proxies,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	Recorder string   `json:"recorder"`
	Version  string   `json:"version"`
}

// Entry is one MCP server entry in a Report.
type Entry struct {
	Host      string      `json:"host"`
	File      string      `json:"file"`
	Scope     string      `json:"scope,omitempty"`
	Project   string      `json:"project,omitempty"`
	Name      string      `json:"name"`
	Kind      string      `json:"kind"`
	Wrapped   bool        `json:"wrapped"`
	Broken    bool        `json:"broken"`
	Problem   string      `json:"problem,omitempty"`
	Command   []string    `json:"command,omitempty"`
	Args      []string    `json:"args,omitempty"`
	URL       string      `json:"url,omitempty"`
	Transport string      `json:"transport,omitempty"`
	Server    string      `json:"server,omitempty"`
	Proxy     string      `json:"proxy,omitempty"`
	Policy    []string    `json:"policy,omitempty"`
	Check     *EntryCheck `json:"check,omitempty"`
}

// Proxy is one bir-proxy command the wrapped entries run, in a Report.
type Proxy struct {
	Command string `json:"command"`
	Runs    bool   `json:"runs"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

func newEntry(l mcpconfig.Loaded, s mcpconfig.Server, checks map[string]proxyCheck, started map[int]EntryCheck, i int) Entry {
	host := l.Host
	if host == "" {
		host = mcpconfig.HostClaudeCode
	}
	e := Entry{
		Host: string(host), File: l.Loc.File, Scope: string(l.Scope), Project: l.Loc.Project, Name: s.Name,
		Kind: strings.ReplaceAll(s.Kind.String(), " ", "-"), Problem: s.Problem, Command: redact.CommandLine(s.Command),
		Args:      redact.CommandLine(s.Args),
		Transport: s.Transport, Server: s.ProxyName, Proxy: s.ProxyCommand, Policy: s.Policy,
	}
	if s.URL != "" {
		e.URL = redact.URL(s.URL)
	}
	e.Wrapped = s.Kind == mcpconfig.KindWrapped || s.Kind == mcpconfig.KindWrappedRemote
	switch ch, ok := checks[s.ProxyCommand]; {
	case s.Broken != "":
		// Which argument is the server's command is not known.
		e.Broken, e.Problem, e.Command = true, s.Broken, nil
	case e.Wrapped && ok && ch.err != nil:
		e.Broken, e.Problem = true, s.ProxyCommand+" does not run: "+ch.err.Error()
	}
	if ch, ok := started[i]; ok {
		e.Check = &ch
	}
	return e
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// printChecks prints what status --check found for each wrapped entry.
func printChecks(w io.Writer, servers []mcpconfig.Server, started map[int]EntryCheck) {
	if len(started) == 0 {
		return
	}
	fmt.Fprintln(w, "  started as the host would (initialize, tools/list):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, s := range servers {
		if ch, ok := started[i]; ok {
			fmt.Fprintf(tw, "    %s\t%s\n", termtext.Line(s.Name), termtext.Line(ch.String()))
		}
	}
	tw.Flush()
}

type proxyCheck struct {
	version string
	err     error
}

// proxyDeadline bounds `bir-proxy --version`: a command that hangs is as
// broken as one that is missing.
const proxyDeadline = 5 * time.Second

// ProxyRuns checks that command resolves (as the host would look it up: on
// PATH when it has no separator) and is a bir-proxy that runs, by running
// it with --version.
func ProxyRuns(ctx context.Context, command string) (string, error) {
	path, err := exec.LookPath(command)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, proxyDeadline)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	v := strings.TrimSpace(string(out))
	if !strings.HasPrefix(v, "bir-proxy ") {
		return "", fmt.Errorf("%s --version printed %q, not a bir-proxy version", path, v)
	}
	return v, nil
}

func printServers(w io.Writer, servers []mcpconfig.Server, checks map[string]proxyCheck) {
	if len(servers) == 0 {
		fmt.Fprintln(w, "  (no servers)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range servers {
		var state, what string
		switch s.Kind {
		case mcpconfig.KindWrapped:
			state, what = "wrapped", termtext.Argv(s.Command)
			if s.ProxyName != "" && s.ProxyName != s.Name {
				what += fmt.Sprintf("  (reports as %q)", s.ProxyName)
			}
		case mcpconfig.KindWrappedRemote:
			state, what = "wrapped", fmt.Sprintf("%s  (remote, %s)", redact.URL(s.URL), s.Transport)
			if s.ProxyName != "" && s.ProxyName != s.Name {
				what += fmt.Sprintf("  (reports as %q)", s.ProxyName)
			}
		case mcpconfig.KindStdio:
			state, what = "not wrapped", termtext.Argv(s.Command)
		case mcpconfig.KindRemote:
			state, what = "not wrapped", fmt.Sprintf("%s  (remote, %s)", redact.URL(s.URL), s.Transport)
			if s.Problem != "" {
				what += "  (cannot be wrapped: " + s.Problem + ")"
			}
		default:
			state, what = "not understood", s.Problem
		}
		if s.Broken != "" {
			// The proxy's flags do not parse, so which argument is the server's
			// command is not known: the arguments as written, after why.
			state, what = "BROKEN", "("+s.Broken+")  "+termtext.Argv(redact.CommandLine(append([]string{"bir-proxy"}, s.Args...)))
		}
		if len(s.Policy) > 0 {
			what += "  [" + strings.Join(s.Policy, " ") + "]"
		}
		if ch, ok := checks[s.ProxyCommand]; ok && ch.err != nil && state == "wrapped" {
			state = "BROKEN"
			what += "  (" + s.ProxyCommand + " does not run)"
		}
		if s.Name == mcpconfig.RecorderName {
			what += "  (the recorder's own server)"
		}
		// The name and what is shown are the file's words (a tab in a name would
		// split the row, an escape sequence act on the terminal): escaped, as
		// termtext.Argv escapes a command's (Line leaves its escapes as they are).
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", termtext.Line(s.Name), state, termtext.Line(what))
	}
	tw.Flush()
}

// RecorderStatus describes where this directory's reports would go, in one line,
// and then what waits in the spool and what was dropped from it, a line per server;
// off is BIR_OFF.
func RecorderStatus(ctx context.Context, off bool) string {
	if off {
		return "BIR_OFF is set: nothing is recorded"
	}
	line := recorderLine(ctx)
	state, err := recorder.DefaultStateDir()
	if err != nil {
		return line
	}
	sts, err := recorder.SpoolStatus(state)
	if err != nil {
		return line + "\nspool: " + err.Error()
	}
	return line + spoolLines(sts)
}

// spoolLines describes the spool of each server, each line after a newline.
func spoolLines(sts []recorder.SpoolState) string {
	var b strings.Builder
	for _, st := range sts {
		if st.Files > 0 {
			fmt.Fprintf(&b, "\nspool: %s: %s in %d file(s) waiting for the recorder", st.Server, humanSize(st.Bytes), st.Files)
		}
		if st.Dropped > 0 {
			fmt.Fprintf(&b, "\nspool: %s: %d reports dropped because the spool was full (--spool-max), the last at %s",
				st.Server, st.Dropped, st.LastDrop.Local().Format(time.DateTime))
		}
	}
	return b.String()
}

func humanSize(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/(1<<10), "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1<<10 {
			break
		}
		v, unit = v/(1<<10), u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func recorderLine(ctx context.Context) string {
	cwd, _ := os.Getwd()
	ep, err := recorder.Discover(recorder.DiscoverOptions{Env: os.Getenv, Dir: cwd})
	if err != nil {
		return "recorder misconfigured: " + err.Error()
	}
	if ep == nil {
		state, err := recorder.DefaultStateDir()
		if err != nil {
			return "no recorder configured, and no state directory: " + err.Error()
		}
		return "no recorder configured: reports go to the journal " + journal.Dir(state)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := recorder.Ping(ctx, ep); err != nil {
		return fmt.Sprintf("recorder at %s (from %s) is not reachable: %v; reports wait in the spool", ep.URL, ep.Source, err)
	}
	return fmt.Sprintf("recorder reachable at %s (from %s)", ep.URL, ep.Source)
}

// reportNames are the names s's proxy may report (and leave its telemetry state) as:
// its --server name, or the default the proxy takes (servername.Default of the
// command, a remote URL's host), and the entry's own name.
func reportNames(s mcpconfig.Server) []string {
	names := []string{s.Name}
	switch {
	case s.ProxyName != "":
		names = append(names, s.ProxyName)
	case s.Kind == mcpconfig.KindWrapped && len(s.Command) > 0:
		names = append(names, servername.Default(s.Command))
	case s.Kind == mcpconfig.KindWrappedRemote:
		if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
			names = append(names, u.Hostname())
		}
	}
	return names
}

// otelStatus is what status says of the exporters' last states (telemetry.StatePath),
// a line per server that has one, each ending in a newline; "" when none. With names
// (nil: every server's), only those servers' states are shown, and the others are
// counted in one line.
func otelStatus(now time.Time, names map[string]bool) string {
	state, err := statedir.Dir()
	if err != nil {
		return ""
	}
	sts, err := telemetry.ReadStates(telemetry.StateDir(state))
	if err != nil {
		return "OpenTelemetry: " + err.Error() + "\n"
	}
	var b strings.Builder
	others := 0
	for _, st := range sts {
		if names != nil && !names[st.Server] {
			others++
			continue
		}
		when := "at its exit"
		if st.Running {
			when = fmt.Sprintf("while running (pid %d)", st.PID)
		}
		fmt.Fprintf(&b, "OpenTelemetry: %s: %d spans exported, %d dropped, %d rejected by the collector; said %s, %s ago",
			redact.Label(st.Server, 128), st.Exported, st.Dropped, st.Rejected, when, age(now, st.Written))
		if st.LastError != "" && (st.Dropped > 0 || st.Rejected > 0) {
			fmt.Fprintf(&b, "; the last trouble, %s ago: %s", age(now, st.LastAt), redact.Label(st.LastError, 512))
		}
		b.WriteByte('\n')
	}
	if others > 0 {
		fmt.Fprintf(&b, "OpenTelemetry: %d other %s on this machine (bir-proxy status --all shows them)\n",
			others, plural(others, "server has telemetry state", "servers have telemetry state"))
	}
	return b.String()
}

// age is how long ago t was, rounded for a person.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	default:
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
}
