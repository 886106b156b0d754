#!/usr/bin/env node
// task-host: a scripted MCP host that calls a tool answered with a task handle and
// follows the task to its final result, against servers/task-server.mjs. Same command
// line and outputs as session-host.mjs; its calls file also lists the tasks it
// followed (`tasks`: callId, taskId, the last status, the final text). Scenarios:
//
//   tasks-2025-11-25   SDK 1.x client: client.experimental.tasks.callToolStream sends
//                      the call with params.task, polls tasks/get, then tasks/result.
//   tasks-2025-11-25-failed   the same, the task ending failed (a tool error): the
//                      SDK yields an error and never asks tasks/result.
//   tasks-2026-07-28   SDK 2.4.0 client pinned to 2026-07-28. It refuses the handle
//                      (`resultType: "task"`: SdkError UNSUPPORTED_RESULT_TYPE), so
//                      the host takes the handle from the wire and polls tasks/get
//                      with client.request and an explicit schema, as the SDK allows
//                      for the Tasks extension's names. See docs/e2e.md.
import { Session, main, parseArgs } from './cli.mjs';

const opts = parseArgs(process.argv.slice(2));
const s = new Session(opts);
s.extra = { tasks: [] };
const TOPIC = 'tides ✓';

function spawnTransport(Kind) {
  const t = s.wire.tap(new Kind({ command: opts.command[0], args: opts.command.slice(1), env: opts.env, stderr: 'pipe' }));
  t.stderr.on('data', (d) => process.stderr.write(d));
  return t;
}

// noteTask keeps what the host got of a task for the calls file and the transcript.
function noteTask(callId, taskId, status, result) {
  const text = result?.content?.[0]?.text ?? null;
  s.extra.tasks.push({ callId, taskId, status, text });
  s.note(`task ${taskId} ended ${status}; final result: ${JSON.stringify(text)}`);
}

async function run2025(end = 'completed') {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const { CallToolResultSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const client = new Client({ name: 'bir-e2e-host', version: '1.0.0' }, { capabilities: {} });
  await s.step('connect (initialize)', () => client.connect(spawnTransport(StdioClientTransport)));
  await s.step('tools/list (the tool says taskSupport required)', () => client.listTools());
  const title =
    end === 'failed'
      ? 'research that fails (tools/call with params.task, tasks/get until failed)'
      : 'research (tools/call with params.task, tasks/get until completed, tasks/result)';
  await s.step(title, async () => {
    const args = s.args(end === 'failed' ? { topic: TOPIC, end } : { topic: TOPIC });
    const callId = args._bir_call_id ?? null;
    let taskId;
    let status;
    let result;
    const stream = client.experimental.tasks.callToolStream({ name: 'research', arguments: args }, CallToolResultSchema, {
      task: { ttl: 60000 },
    });
    for await (const m of stream) {
      switch (m.type) {
        case 'taskCreated':
          taskId = m.task.taskId;
          status = m.task.status;
          break;
        case 'taskStatus':
          status = m.task.status;
          break;
        case 'result':
          result = m.result;
          break;
        case 'error':
          if (end !== 'failed') throw m.error;
          s.note(`the SDK's task stream ended with an error: ${m.error.message}`);
          break;
      }
    }
    if (end === 'failed') {
      noteTask(callId, taskId, status, result);
      return;
    }
    if (taskId === undefined || result === undefined) {
      throw new Error(`the SDK's task stream ended without a task or a result (task ${taskId}, status ${status})`);
    }
    noteTask(callId, taskId, status, result);
  });
  await s.step('close', async () => {
    await client.close();
    const { code, signal } = await s.wire.exited;
    s.note(`server command exited: code=${code} signal=${signal}`);
  });
}

async function run2026() {
  const { Client } = await import('@modelcontextprotocol/client');
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
  const z = await import('zod');
  // A subclass probes in place, on the tapped connection (see stateless-host.mjs).
  class InPlaceProbeTransport extends StdioClientTransport {}
  const client = new Client(
    { name: 'bir-e2e-host', version: '2.0.0' },
    { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  const TaskState = z.looseObject({
    taskId: z.string(),
    status: z.string(),
    pollIntervalMs: z.number().optional(),
    result: z.looseObject({}).optional(),
    error: z.looseObject({}).optional(),
  });
  await s.step('connect (server/discover on the connection)', () => client.connect(spawnTransport(InPlaceProbeTransport)));
  await s.step('tools/list', () => client.listTools());
  await s.step('research (tools/call answered resultType task, tasks/get until completed)', async () => {
    const args = s.args({ topic: TOPIC });
    const callId = args._bir_call_id ?? null;
    const since = s.wire.mark();
    // What the SDK makes of the handle goes into the transcript.
    await s.expectError(() => client.callTool({ name: 'research', arguments: args }));
    const handle = await s.wire.waitFor((m) => m.id !== undefined && m.result?.resultType === 'task', {
      since,
      what: 'the task handle',
    });
    const taskId = handle.result.taskId;
    let state = handle.result;
    for (let i = 0; state.status === 'working' || state.status === 'input_required'; i++) {
      if (i >= 20) throw new Error(`task ${taskId} still ${state.status} after 20 polls`);
      if (i > 0) await new Promise((r) => setTimeout(r, state.pollIntervalMs ?? 50));
      state = await client.request({ method: 'tasks/get', params: { taskId } }, TaskState);
    }
    noteTask(callId, taskId, state.status, state.result);
  });
  await s.step('close', async () => {
    await client.close();
    const { code, signal } = await s.wire.exited;
    s.note(`server command exited: code=${code} signal=${signal}`);
  });
}

const runs = {
  'tasks-2025-11-25': () => run2025(),
  'tasks-2025-11-25-failed': () => run2025('failed'),
  'tasks-2026-07-28': run2026,
};
if (!runs[opts.scenario]) {
  throw new Error(`unknown scenario ${opts.scenario}; the task host has: ${Object.keys(runs).join(', ')}`);
}
await main(opts, s, runs[opts.scenario]);
