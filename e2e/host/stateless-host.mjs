#!/usr/bin/env node
// stateless-host: a scripted MCP host of the stateless era (2026-07-28) on the official
// v2 client (@modelcontextprotocol/client), pinned to that revision. Same command line
// and outputs as session-host.mjs. See docs/e2e.md.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Session, main, parseArgs } from './cli.mjs';
import { probeArgs, probeCancel, probeSlow } from './probe-steps.mjs';

const opts = parseArgs(process.argv.slice(2));
if (opts.scenario !== 'probe') {
  throw new Error(`unknown scenario ${opts.scenario}; the stateless host has: probe`);
}
const s = new Session(opts);

// The SDK sends its server/discover probe on a disposable sibling process when the
// transport is exactly its base class; a subclass probes in place, on the tapped
// connection, so the discover exchange shows in the transcript. The last step uses
// the base class too, so the proxy also faces a real host's sibling start.
class InPlaceProbeTransport extends StdioClientTransport {}

function newClient() {
  const client = new Client(
    { name: 'bir-e2e-host', version: '2.0.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  client.setRequestHandler('elicitation/create', async () => ({
    action: 'accept',
    content: { confirm: true, note: 'approved in stateless era' },
  }));
  return client;
}

function newTransport(Kind) {
  if (opts.url) {
    // The host talks HTTP itself: the baseline of a run through `bir-proxy --url`.
    const conn = s.wire.connections + 1;
    return s.wire.tapSend(new StreamableHTTPClientTransport(new URL(opts.url), { fetch: s.wire.fetch(conn) })).transport;
  }
  const t = s.wire.tap(new Kind({ command: opts.command[0], args: opts.command.slice(1), env: opts.env, stderr: 'pipe' }));
  t.stderr.on('data', (d) => process.stderr.write(d));
  return t;
}

const client = newClient();
const call = (name, args, options) => client.callTool({ name, arguments: s.args(args) }, options);

await main(opts, s, async () => {
  const transport = newTransport(InPlaceProbeTransport);
  await s.step('connect (server/discover on the connection)', () => client.connect(transport));
  await s.step('tools/list', () => client.listTools());
  await s.step('inspect-args (the server shows what arrived)', () => call('inspect-args', probeArgs(s)));
  await s.step('confirm (multi round-trip: input_required, then the retry)', () => call('confirm', { action: 'deploy' }));
  await probeSlow(s, call);
  await probeCancel(s, call);
  await s.step('fail (tool error)', () => call('fail', { why: 'on purpose' }));
  await s.step('no-such-tool (JSON-RPC error)', () => s.expectError(() => call('no-such-tool', {})));
  await s.step('big (2 MiB result line)', () => call('big', { bytes: 2 << 20 }));
  await s.step('close', async () => {
    await client.close();
    if (opts.url) {
      return; // no server command here; the remote suite checks the proxy's exit itself
    }
    const { code, signal } = await s.wire.exited;
    s.note(`server command exited: code=${code} signal=${signal}`);
  });
  if (opts.url) {
    return; // the second connection is about a sibling process: stdio only
  }

  const second = newClient();
  const transport2 = newTransport(StdioClientTransport);
  await s.step('second connection: connect (server/discover on a sibling process)', () => second.connect(transport2));
  await s.step('second connection: inspect-args', () =>
    second.callTool({ name: 'inspect-args', arguments: s.args({ second: true }) }),
  );
  await s.step('second connection: close', async () => {
    await second.close();
    const { code, signal } = await s.wire.exited;
    s.note(`server command exited: code=${code} signal=${signal}`);
  });
});
