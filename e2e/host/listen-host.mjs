#!/usr/bin/env node
// listen-host: a stateless-era (2026-07-28) host on the official SDK 2.4.0 client that
// keeps a `subscriptions/listen` stream open (Client.listen, filter toolsListChanged)
// while its server is killed, for the listen-stream tests (SPEC §7, docs/revive.md
// "Listen streams"): a stdio server that bir-proxy revives, or a Streamable HTTP
// server behind `bir-proxy --url` that the test starts again on the same port. Through
// the proxy the host never sees it go. Steps:
//
//   1. connect (pinned 2026-07-28), listen({toolsListChanged: true})
//   2. whoami → the server's pid; SIGKILL it (or, with --restart-by-parent, write
//      `restart PID` on stdout and wait for a `restarted` line on stdin: the test kills
//      the server and starts a new one)
//   3. wait for a notifications/tools/list_changed on the stream (the proxy's, after
//      the revival or the stream's new POST), then whoami again (a new pid)
//   4. add-tool extra → the NEW server emits notifications/tools/list_changed; wait for
//      it; tools/list has `extra`
//   5. the subscription is still open (closed has not settled), then close it
//
// Usage: listen-host.mjs --out RESULT.json [--restart-by-parent] (-- COMMAND ARGS... | --url URL)
// With --url the host talks Streamable HTTP to the server itself (the SDK's
// StreamableHTTPClientTransport): what a host without the proxy sees.
// RESULT.json: {steps, pids, notes (every list_changed: its _meta subscription id and
// the step it arrived in), subscriptionId, honoredFilter, closedEarly, tools, errors,
// lines (every raw line the server side wrote)}. Exit 1 when a step failed; the result
// file is written either way.
import { writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const WAIT_MS = 30_000; // every wait has a deadline
const SID = 'io.modelcontextprotocol/subscriptionId';

const argv = process.argv.slice(2);
const outAt = argv.indexOf('--out');
const dash = argv.indexOf('--');
const urlAt = argv.indexOf('--url');
const byParent = argv.slice(0, dash < 0 ? argv.length : dash).includes('--restart-by-parent');
if (outAt < 0 || (dash < 0 || dash === argv.length - 1) === (urlAt < 0 || (dash >= 0 && urlAt > dash))) {
  console.error('usage: listen-host.mjs --out RESULT.json [--restart-by-parent] (-- COMMAND ARGS... | --url URL)');
  process.exit(2);
}
const out = argv[outAt + 1];
const command = dash < 0 ? [] : argv.slice(dash + 1);
const url = dash < 0 ? argv[urlAt + 1] : '';

const result = { steps: [], pids: [], notes: [], errors: [], lines: [], closedEarly: null, tools: [] };
let step = 'start';
const log = (m) => process.stderr.write(`[listen-host] ${m}\n`);

// A subclass probes in place (the SDK sends its server/discover on a sibling process
// when the transport is exactly the base class): one proxy, one server lineage.
class InPlaceTransport extends StdioClientTransport {}
let transport;
if (url) {
  transport = new StreamableHTTPClientTransport(new URL(url));
} else {
  // The whole environment, not the SDK's default few variables: the test's
  // XDG_STATE_HOME must reach the proxy, or it pins and journals into the user's home.
  transport = new InPlaceTransport({ command: command[0], args: command.slice(1), env: { ...process.env }, stderr: 'pipe' });
  transport.stderr?.on('data', (d) => process.stderr.write(d));
  const start = transport.start.bind(transport);
  transport.start = async () => {
    await start();
    let pending = '';
    transport._process.stdout.on('data', (chunk) => {
      pending += chunk.toString('utf8');
      let nl;
      while ((nl = pending.indexOf('\n')) >= 0) {
        result.lines.push({ step, line: pending.slice(0, nl) });
        pending = pending.slice(nl + 1);
      }
    });
  };
}

// --restart-by-parent: the test reads `restart PID` from our stdout and answers
// `restarted` on our stdin once a new server listens.
const parentLines = byParent ? createInterface({ input: process.stdin })[Symbol.asyncIterator]() : null;
const askParentToRestart = async (pid) => {
  process.stdout.write(`restart ${pid}\n`);
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${WAIT_MS} ms without the test's restarted line`)), WAIT_MS);
  });
  try {
    const { value, done } = await Promise.race([parentLines.next(), timeout]);
    if (done || value.trim() !== 'restarted') throw new Error(`the test answered ${done ? 'nothing (stdin ended)' : JSON.stringify(value)}, want restarted`);
  } finally {
    clearTimeout(timer);
  }
};
const afterKill = byParent ? 'list_changed after the restart' : 'list_changed after the revival';

const client = new Client(
  { name: 'bir-e2e-listen-host', version: '2.0.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
client.onerror = (e) => result.errors.push(`client onerror in ${step}: ${e?.message ?? e}`);

// Change notifications on a stream go to the ordinary handlers (Client.listen).
const waiters = [];
client.setNotificationHandler('notifications/tools/list_changed', (n) => {
  result.notes.push({ step, method: n.method, subscriptionId: n.params?._meta?.[SID] ?? null });
  for (const w of waiters.splice(0)) w();
});
const waitNotes = (count) =>
  new Promise((resolve, reject) => {
    const check = () => {
      if (result.notes.length >= count) {
        clearTimeout(timer);
        resolve();
        return true;
      }
      if (result.closedEarly !== null) {
        // The stream ended: no list_changed will come on it.
        clearTimeout(timer);
        reject(new Error(`the subscription ended (${result.closedEarly.cause}) before list_changed #${count}`));
        return true;
      }
      return false;
    };
    const timer = setTimeout(() => reject(new Error(`${WAIT_MS} ms without list_changed #${count} (have ${result.notes.length})`)), WAIT_MS);
    if (!check()) {
      const again = () => {
        if (!check()) waiters.push(again);
      };
      waiters.push(again);
    }
  });

const whoami = async () => {
  const r = await client.callTool({ name: 'whoami', arguments: {} });
  const pid = Number(r.content?.[0]?.text);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`whoami answered ${JSON.stringify(r)}`);
  result.pids.push(pid);
  return pid;
};

async function run(name, fn) {
  step = name;
  log(`step ${name}`);
  await fn();
  result.steps.push(name);
}

let failed;
try {
  let sub;
  await run('connect', () => client.connect(transport));
  await run('listen', async () => {
    sub = await client.listen({ toolsListChanged: true });
    result.honoredFilter = sub.honoredFilter;
    sub.closed.then((cause) => {
      result.closedEarly ??= { step, cause };
      for (const w of waiters.splice(0)) w();
    });
  });
  await run('kill the server', async () => {
    const pid = await whoami();
    if (byParent) await askParentToRestart(pid);
    else process.kill(pid, 'SIGKILL');
  });
  await run(afterKill, () => waitNotes(1));
  await run('whoami on the new server', async () => {
    await whoami();
  });
  await run('add-tool on the new server', async () => {
    await client.callTool({ name: 'add-tool', arguments: { name: 'extra' } });
    await waitNotes(2);
  });
  await run('tools/list', async () => {
    result.tools = (await client.listTools()).tools.map((t) => t.name);
  });
  await run('close', async () => {
    // Open up to here: closed settles only on close (or an error, or the stream's end).
    result.openAtClose = result.closedEarly === null;
    await sub.close();
    await client.close();
  });
} catch (err) {
  failed = err;
  result.errors.push(`step ${step} failed: ${err?.stack ?? err}`);
}
result.failedStep = failed ? step : null;
writeFileSync(out, JSON.stringify(result, null, 2));
log(failed ? `FAILED in ${step}` : 'done');
process.exit(failed ? 1 : 0);
