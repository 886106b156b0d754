#!/usr/bin/env node
// session-host: a scripted MCP host of the session era (2024-11-05 … 2025-11-25) on the
// official TypeScript SDK 1.x client. It runs one scenario against a server command
// and writes a normalized transcript of the wire plus the step reports a proxy in
// between should have sent. See docs/e2e.md.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { Session, main, parseArgs } from './cli.mjs';
import { probeArgs, probeCancel, probeSlow } from './probe-steps.mjs';

const opts = parseArgs(process.argv.slice(2));

// A 1x1 PNG, written into the filesystem server's directory for read_media_file.
const TINY_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);

// server-everything's simulated logging draws one of these at random every 5 s.
const SIMULATED_LOG = [
  ['debug', 'Debug-level message'],
  ['info', 'Info-level message'],
  ['notice', 'Notice-level message'],
  ['warning', 'Warning-level message'],
  ['error', 'Error-level message'],
  ['critical', 'Critical-level message'],
  ['alert', 'Alert level-message'],
  ['emergency', 'Emergency-level message'],
].flatMap(([level, data]) => [
  // Over HTTP the server names the session in each line (masked to <UUID>).
  JSON.stringify({ method: 'notifications/message', params: { level, data }, jsonrpc: '2.0' }),
  JSON.stringify({ method: 'notifications/message', params: { level, data: `${data} - SessionId <UUID>` }, jsonrpc: '2.0' }),
]);

const scenarios = {
  everything: {
    wire: {
      rewrite: [(line) => (SIMULATED_LOG.includes(line) ? '<one of the 8 simulated log lines, exact bytes>' : undefined)],
      periodic: [
        (line) => line === '<one of the 8 simulated log lines, exact bytes>',
        (line) => line === '{"method":"notifications/resources/updated","params":{"uri":"demo://resource/dynamic/text/1"},"jsonrpc":"2.0"}',
      ],
    },
    capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } },
    run: everything,
  },
  filesystem: {
    capabilities: {},
    // The server is started with <tmp>/fs as its only allowed directory (no roots
    // capability, so no asynchronous roots update races the first calls).
    setup: () => {
      mkdirSync(join(opts.tmp, 'fs'), { recursive: true });
      writeFileSync(join(opts.tmp, 'fs', 'pixel.png'), TINY_PNG);
    },
    run: filesystem,
  },
  memory: { capabilities: {}, run: memory },
  probe: { capabilities: { elicitation: { form: {} } }, run: probe },
};

const scenario = scenarios[opts.scenario];
if (!scenario) {
  throw new Error(`unknown scenario ${opts.scenario}; have ${Object.keys(scenarios).join(', ')}`);
}
const s = new Session(opts, scenario.wire);

let roots = [{ uri: 'file:///e2e/workspace', name: 'workspace' }];
const client = new Client({ name: 'bir-e2e-host', version: '1.0.0' }, { capabilities: scenario.capabilities });
const caps = scenario.capabilities;
if (caps.roots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots }));
if (caps.sampling) client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: 'assistant',
  content: { type: 'text', text: 'Sampled reply: ☀️ 23°C' },
  model: 'e2e-model',
  stopReason: 'endTurn',
}));
if (caps.elicitation) client.setRequestHandler(ElicitRequestSchema, async (req) => {
  if (req.params.mode === 'url') {
    return { action: 'decline' };
  }
  if (/Really/.test(req.params.message)) {
    return { action: 'accept', content: { confirm: true, note: 'approved in session era' } };
  }
  return {
    action: 'accept',
    content: { name: 'Ada Lovelace', check: true, email: 'ada@example.com', integer: 7, number: 2.5 },
  };
});

// With --url the host talks HTTP to the server itself: the baseline of a run through
// `bir-proxy --url`. The connection number is the tap's, as for stdio.
function httpTransport() {
  const conn = s.wire.connections + 1;
  const Transport = opts.urlTransport === 'sse' ? SSEClientTransport : StreamableHTTPClientTransport;
  return s.wire.tapSend(new Transport(new URL(opts.url), { fetch: s.wire.fetch(conn) })).transport;
}
const transport = opts.url
  ? httpTransport()
  : s.wire.tap(new StdioClientTransport({ command: opts.command[0], args: opts.command.slice(1), env: opts.env, stderr: 'pipe' }));
transport.stderr?.on('data', (d) => process.stderr.write(d));

const call = (name, args, options) => client.callTool({ name, arguments: s.args(args) }, undefined, options);
const isLog = (re) => (m) => m.method === 'notifications/message' && re.test(String(m.params?.data));

async function everything() {
  await s.step('initial roots sync (server asks 350 ms after initialized)', () =>
    s.wire.waitFor(isLog(/^Roots updated: 1 root/), { what: 'the log line "Roots updated: 1 root(s)"' }),
  );
  await s.step('ping', () => client.ping());
  await s.step('tools/list', () => client.listTools());
  await s.step('prompts/list', () => client.listPrompts());
  await s.step('prompts/get simple', () => client.getPrompt({ name: 'simple-prompt' }));
  await s.step('prompts/get args', () => client.getPrompt({ name: 'args-prompt', arguments: { city: 'Zürich', state: 'ZH' } }));
  await s.step('prompts/get embedded blob resource', () =>
    client.getPrompt({ name: 'resource-prompt', arguments: { resourceType: 'Blob', resourceId: '2' } }),
  );
  await s.step('completion/complete prompt argument', () =>
    client.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, argument: { name: 'department', value: 'E' } }),
  );
  await s.step('completion/complete with context', () =>
    client.complete({
      ref: { type: 'ref/prompt', name: 'completable-prompt' },
      argument: { name: 'name', value: '' },
      context: { arguments: { department: 'Engineering' } },
    }),
  );
  await s.step('completion/complete resource template', () =>
    client.complete({ ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' }, argument: { name: 'resourceId', value: '3' } }),
  );
  const listed = await s.step('resources/list', () => client.listResources());
  await s.step('resources/templates/list', () => client.listResourceTemplates());
  await s.step('resources/read static document', () => client.readResource({ uri: listed.resources[0].uri }));
  await s.step('resources/read dynamic text', () => client.readResource({ uri: 'demo://resource/dynamic/text/1' }));
  await s.step('resources/read dynamic blob', () => client.readResource({ uri: 'demo://resource/dynamic/blob/2' }));
  await s.step('resources/read unknown (JSON-RPC error)', () =>
    s.expectError(() => client.readResource({ uri: 'demo://resource/dynamic/text/0' })),
  );
  await s.step('logging/setLevel debug', () => client.setLoggingLevel('debug'));
  await s.step('resources/subscribe', () => client.subscribeResource({ uri: 'demo://resource/dynamic/text/1' }));
  await s.step('toggle-subscriber-updates on', async () => {
    const since = s.wire.mark();
    await call('toggle-subscriber-updates', {});
    await s.wire.waitFor((m) => m.method === 'notifications/resources/updated', { since, what: 'notifications/resources/updated' });
  });
  await s.step('toggle-subscriber-updates off', () => call('toggle-subscriber-updates', {}));
  await s.step('resources/unsubscribe', () => client.unsubscribeResource({ uri: 'demo://resource/dynamic/text/1' }));
  await s.step('toggle-simulated-logging on', async () => {
    const since = s.wire.mark();
    await call('toggle-simulated-logging', {});
    await s.wire.waitFor((m) => m.method === 'notifications/message', { since, what: 'a simulated log line' });
  });
  await s.step('toggle-simulated-logging off', () => call('toggle-simulated-logging', {}));
  await s.step('logging/setLevel info', () => client.setLoggingLevel('info'));

  await s.step('tools/call echo (secret in free text)', () =>
    call('echo', { message: `héllo ✓ "quoted" \\ my key ${s.secret('sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56')} is set` }),
  );
  await s.step('tools/call get-sum', () => call('get-sum', { a: 2, b: 40.5 }));
  await s.step('tools/call get-sum invalid (tool error)', () => call('get-sum', { a: 'two', b: 1 }));
  await s.step('tools/call unknown tool (tool error)', () => call('no-such-tool', {}));
  await s.step('tools/call get-annotated-message with image', () =>
    call('get-annotated-message', { messageType: 'error', includeImage: true }),
  );
  await s.step('tools/call get-tiny-image', () => call('get-tiny-image', {}));
  await s.step('tools/call get-resource-links', () => call('get-resource-links', { count: 3 }));
  await s.step('tools/call get-resource-reference text', () => call('get-resource-reference', { resourceType: 'Text', resourceId: 4 }));
  await s.step('tools/call get-resource-reference blob', () => call('get-resource-reference', { resourceType: 'Blob', resourceId: 5 }));
  await s.step('tools/call get-structured-content', () => call('get-structured-content', { location: 'New York' }));
  await s.step('tools/call get-env (no BIR_* reaches the server)', () => call('get-env', {}));
  await s.step('tools/call get-roots-list', () => call('get-roots-list', {}));
  await s.step('tools/call trigger-sampling-request (server-to-client request)', () =>
    call('trigger-sampling-request', { prompt: 'Weather in Zürich?', maxTokens: 20 }),
  );
  await s.step('tools/call trigger-elicitation-request (form)', () => call('trigger-elicitation-request', {}));
  await s.step('tools/call trigger-url-elicitation (declined)', () =>
    call('trigger-url-elicitation', { url: 'https://example.com/authorize?state=e2e', message: 'Please authorize' }),
  );
  await s.step('tools/call gzip-file-as-resource', () =>
    call('gzip-file-as-resource', { name: 'hello.txt.gz', data: `data:text/plain;base64,${Buffer.from('hello, proxy\n'.repeat(20)).toString('base64')}` }),
  );
  await s.step('resources/read session resource (gzip blob)', () => client.readResource({ uri: 'demo://resource/session/hello.txt.gz' }));
  await s.step('tools/call trigger-long-running-operation with progress', () =>
    call('trigger-long-running-operation', { duration: 0.2, steps: 2 }, { onprogress: () => {} }),
  );
  await s.step('tools/call trigger-long-running-operation cancelled by the host', async () => {
    const since = s.wire.mark();
    const ac = new AbortController();
    const pending = call('trigger-long-running-operation', { duration: 4, steps: 2 }, {
      signal: ac.signal,
      onprogress: (p) => {
        if (p.progress === 1) ac.abort('user pressed stop');
      },
    });
    await s.expectError(() => pending);
    // The operation keeps running on its timer and sends its last progress anyway;
    // the SDK server suppresses the response of a cancelled request, so the answer
    // never showing up is the server's evidence that the cancellation reached it.
    await s.wire.waitFor((m) => m.method === 'notifications/progress' && m.params?.progress === 2, {
      since,
      what: 'the cancelled operation\'s last progress notification',
    });
    await client.ping();
  });
  await s.step('roots/list_changed (server asks again)', async () => {
    const since = s.wire.mark();
    roots = [...roots, { uri: 'file:///e2e/second', name: 'second root ✓' }];
    await client.sendRootsListChanged();
    await s.wire.waitFor(isLog(/^Roots updated: 2 root/), { since, what: 'the log line "Roots updated: 2 root(s)"' });
  });
  await s.step('tools/call get-roots-list after change', () => call('get-roots-list', {}));
}

async function filesystem() {
  const root = join(opts.tmp, 'fs');
  const dsn = `postgres://app:${s.secret('S3cr3tPass')}@db.internal:5432/app`;
  await s.step('tools/list', () => client.listTools());
  await s.step('list_allowed_directories', () => call('list_allowed_directories', {}));
  await s.step('write_file (secret in content)', () =>
    call('write_file', { path: join(root, 'notes.md'), content: `# Notes ✓\n\ndb: ${dsn}\nline three\n` }),
  );
  await s.step('read_text_file', () => call('read_text_file', { path: join(root, 'notes.md') }));
  await s.step('read_text_file head', () => call('read_text_file', { path: join(root, 'notes.md'), head: 1 }));
  await s.step('edit_file dry run', () =>
    call('edit_file', { path: join(root, 'notes.md'), edits: [{ oldText: 'line three', newText: 'line 3' }], dryRun: true }),
  );
  await s.step('edit_file', () =>
    call('edit_file', { path: join(root, 'notes.md'), edits: [{ oldText: 'line three', newText: 'line 3' }] }),
  );
  await s.step('read_media_file', () => call('read_media_file', { path: join(root, 'pixel.png') }));
  await s.step('create_directory', () => call('create_directory', { path: join(root, 'sub', 'deeper') }));
  await s.step('move_file', () => call('move_file', { source: join(root, 'notes.md'), destination: join(root, 'sub', 'notes.md') }));
  await s.step('read_multiple_files', () =>
    call('read_multiple_files', { paths: [join(root, 'sub', 'notes.md'), join(root, 'missing.txt')] }),
  );
  await s.step('list_directory', () => call('list_directory', { path: root }));
  await s.step('list_directory_with_sizes', () => call('list_directory_with_sizes', { path: root, sortBy: 'name' }));
  await s.step('directory_tree', () => call('directory_tree', { path: root }));
  await s.step('search_files', () => call('search_files', { path: root, pattern: '**/*.md' }));
  await s.step('get_file_info', () => call('get_file_info', { path: join(root, 'pixel.png') }));
  await s.step('read_text_file missing (tool error)', () => call('read_text_file', { path: join(root, 'nope.txt') }));
  await s.step('read_text_file outside the root (tool error)', () => call('read_text_file', { path: '/etc/hostname' }));
}

async function memory() {
  const token = s.secret('ghp_16C7e42F292c6912E7710c838347Ae178B4a');
  await s.step('tools/list', () => client.listTools());
  await s.step('create_entities', () =>
    call('create_entities', {
      entities: [
        { name: 'Ada', entityType: 'person', observations: ['wrote the first program', 'née Byron'] },
        { name: 'Analytical Engine', entityType: 'machine', observations: [`deploy key ${token} for the repo`] },
      ],
    }),
  );
  await s.step('create_relations', () =>
    call('create_relations', { relations: [{ from: 'Ada', to: 'Analytical Engine', relationType: 'programmed' }] }),
  );
  await s.step('add_observations', () =>
    call('add_observations', { observations: [{ entityName: 'Ada', contents: ['Countess of Lovelace', '数学者'] }] }),
  );
  await s.step('read_graph', () => call('read_graph', {}));
  await s.step('search_nodes', () => call('search_nodes', { query: 'program' }));
  await s.step('open_nodes', () => call('open_nodes', { names: ['Ada', 'Nobody'] }));
  await s.step('delete_observations', () =>
    call('delete_observations', { deletions: [{ entityName: 'Ada', observations: ['née Byron'] }] }),
  );
  await s.step('delete_relations', () =>
    call('delete_relations', { relations: [{ from: 'Ada', to: 'Analytical Engine', relationType: 'programmed' }] }),
  );
  await s.step('delete_entities', () => call('delete_entities', { entityNames: ['Analytical Engine'] }));
  await s.step('read_graph after deletes', () => call('read_graph', {}));
  await s.step('add_observations to a missing entity (tool error)', () =>
    call('add_observations', { observations: [{ entityName: 'Ghost', contents: ['boo'] }] }),
  );
}

async function probe() {
  await s.step('tools/list', () => client.listTools());
  await s.step('inspect-args (the server shows what arrived)', () => call('inspect-args', probeArgs(s)));
  await s.step('confirm (server-to-client elicitation, via the SDK legacy shim)', () => call('confirm', { action: 'deploy' }));
  await probeSlow(s, call);
  await probeCancel(s, call);
  await s.step('fail (tool error)', () => call('fail', { why: 'on purpose' }));
  await s.step('no-such-tool (JSON-RPC error)', () => s.expectError(() => call('no-such-tool', {})));
  await s.step('big (2 MiB result line)', () => call('big', { bytes: 2 << 20 }));
}

await main(opts, s, async () => {
  scenario.setup?.();
  await s.step('connect', () => client.connect(transport));
  await scenario.run();
  await s.step('close', async () => {
    await client.close();
    if (opts.url) {
      return; // no server command here; the remote suite checks the proxy's exit itself
    }
    const { code, signal } = await s.wire.exited;
    s.note(`server command exited: code=${code} signal=${signal}`);
  });
});
