package main

import (
	"bytes"
	"errors"
	"os"
	"strings"

	"github.com/bir-dev/bir-proxy/upstream"
)

// Issue 40: every mistake says what it is. A wrapped entry whose bir-proxy arguments
// do not parse is BROKEN (proxyArgsProblem): wrap, unwrap, status, call --entry and
// the completion read the hosts' files with this check.

// proxyArgsProblem is the usage error bir-proxy would print for args, a wrapped
// entry's arguments, as its command line (mcpconfig.ProxyArgsCheck); nil when it
// would take them. ${VAR} references are expanded from this environment first, as
// the host does in args; one that is not set is left as written.
func proxyArgsProblem(args []string) error {
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = a
		if v, err := upstream.Expand(a, "args", os.LookupEnv); err == nil {
			expanded[i] = v
		}
	}
	var out, said bytes.Buffer
	_, code, ok := parseProxyFlags(&cli{stdout: &out, stderr: &said}, expanded)
	switch {
	case ok:
		return nil
	case code == 0:
		// --help or --version: the proxy prints and exits, and the host gets nothing.
		return errors.New("--help or --version among the flags: bir-proxy prints and exits instead of starting the server")
	}
	msg := strings.TrimSpace(said.String())
	msg = strings.TrimPrefix(msg, "bir-proxy: ")
	msg = strings.TrimSuffix(msg, " (see bir-proxy --help)")
	return errors.New(msg)
}
