#!/usr/bin/env node
// task-server: an MCP server whose one tool, `research`, answers with a task handle
// instead of its result, on the official TypeScript SDKs, in the era named by --era:
//
//   --era 2025-11-25   SDK 1.x (@modelcontextprotocol/sdk), its experimental tasks:
//                      registerToolTask + a TaskStore; the SDK answers tasks/get and
//                      tasks/result itself. The only SDK with a task runtime.
//   --era 2026-07-28   SDK 2.4.0 (@modelcontextprotocol/server) with serveStdio: the
//                      tool handler returns `resultType: "task"` (the SDK passes it on
//                      verbatim) and tasks/get is registered with an explicit schema
//                      (the Tasks extension, SEP-2663); 2.4.0 has no task runtime.
//
// The task ends when the server has read its second tasks/get, so the number of polls
// is the protocol's and not the clock's (the suite compares transcripts). Its final
// result carries, besides the text, the raw lines the server read for the task (the
// tools/call, then each tasks/get), so the host also sees that its bytes arrived as
// it sent them. See docs/e2e.md.
import { randomUUID } from 'node:crypto';
// Imported statically: the raw listener below starts reading stdin, and a line read
// before the SDK's transport listens would be lost to it.
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { McpServer, ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const eraAt = process.argv.indexOf('--era');
const era = eraAt >= 0 ? process.argv[eraAt + 1] : '';

// The raw line of each request as it arrived on stdin, by id, and the raw tasks/get
// lines of each task. A listener beside the SDK transport's, added first, so it has
// seen a line before any handler for it runs.
const rawRequests = new Map();
const rawPolls = new Map();
let pending = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  let nl;
  while ((nl = pending.indexOf(0x0a)) >= 0) {
    const line = pending.subarray(0, nl).toString('utf8');
    pending = pending.subarray(nl + 1);
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      continue; // not JSON: the SDK transport reports it
    }
    if (msg?.id === undefined || typeof msg.method !== 'string') continue;
    rawRequests.set(JSON.stringify(msg.id), line);
    if (rawRequests.size > 64) rawRequests.delete(rawRequests.keys().next().value);
    const taskId = msg.params?.taskId;
    if (msg.method === 'tasks/get' && typeof taskId === 'string') {
      rawPolls.set(taskId, [...(rawPolls.get(taskId) ?? []), line]);
    }
  }
});

// The tasks this server runs: taskId → { topic, end, callLine }. `end` is the tool's
// optional argument: "completed" (the default) or "failed" (2025-11-25: a tool error
// ends a task failed, basic/utilities/tasks.mdx "Task Status").
const jobs = new Map();

function polls(taskId) {
  return rawPolls.get(taskId)?.length ?? 0;
}

function finalResult(taskId) {
  const job = jobs.get(taskId);
  const failed = job.end === 'failed';
  return {
    content: [
      { type: 'text', text: `research on ${job.topic}: ${failed ? 'failed' : 'done'} after ${polls(taskId)} polls` },
      { type: 'text', text: [job.callLine, ...(rawPolls.get(taskId) ?? [])].join('\n') },
    ],
    isError: failed,
  };
}

if (era === '2025-11-25') {

  // The SDK's own store, its tasks finished on their second poll. The SDK's tasks/get
  // handler asks the store for the task after the raw listener has counted the line.
  class Store extends InMemoryTaskStore {
    generateTaskId() {
      return randomUUID(); // the suite masks UUIDs; the stock 32 hex digits it would not
    }
    async getTask(taskId, sessionId) {
      const task = await super.getTask(taskId, sessionId);
      if (task?.status === 'working' && jobs.has(taskId) && polls(taskId) >= 2) {
        const end = jobs.get(taskId).end === 'failed' ? 'failed' : 'completed';
        await this.storeTaskResult(taskId, end, finalResult(taskId), sessionId);
        return super.getTask(taskId, sessionId);
      }
      return task;
    }
  }

  const server = new McpServerV1(
    { name: 'bir-e2e-tasks', version: '1.0.0' },
    {
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: new Store(),
    },
  );
  server.experimental.tasks.registerToolTask(
    'research',
    {
      description: 'Researches a topic as a task: answers with a handle; the task ends on its second poll.',
      inputSchema: { topic: z.string(), end: z.enum(['completed', 'failed']).optional() },
      execution: { taskSupport: 'required' },
    },
    {
      createTask: async ({ topic, end }, extra) => {
        const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 50 });
        jobs.set(task.taskId, { topic, end, callLine: rawRequests.get(JSON.stringify(extra.requestId)) ?? '(raw line not seen)' });
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  server.connect(new StdioServerTransport());
  // The store's ttl timers would keep the process alive after the host closed its end,
  // until the host's SIGTERM; a server ends with its input, as serveStdio's does.
  process.stdin.on('end', () => process.exit(0));
} else if (era === '2026-07-28') {

  // taskId → { status, createdAt, lastUpdatedAt }, beside jobs.
  const states = new Map();
  const fields = (taskId) => {
    const st = states.get(taskId);
    return { taskId, status: st.status, createdAt: st.createdAt, lastUpdatedAt: st.lastUpdatedAt, ttlMs: 60000, pollIntervalMs: 50 };
  };

  const build = () => {
    const server = new McpServer({ name: 'bir-e2e-tasks', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool(
      'research',
      {
        description: 'Researches a topic as a task: answers with a handle; the task ends on its second poll.',
        inputSchema: z.object({ topic: z.string() }),
      },
      async ({ topic }, ctx) => {
        const taskId = randomUUID();
        const now = new Date().toISOString();
        states.set(taskId, { status: 'working', createdAt: now, lastUpdatedAt: now });
        jobs.set(taskId, { topic, callLine: rawRequests.get(JSON.stringify(ctx.mcpReq.id)) ?? '(raw line not seen)' });
        return { resultType: 'task', ...fields(taskId) };
      },
    );
    // The Tasks extension re-defines tasks/get on the era that removed it from core;
    // the SDK admits it only with an explicit schema.
    server.server.setRequestHandler('tasks/get', { params: z.looseObject({ taskId: z.string() }) }, async ({ taskId }) => {
      const st = states.get(taskId);
      if (st === undefined) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown task: ${taskId}`);
      }
      if (st.status === 'working' && polls(taskId) >= 2) {
        st.status = 'completed';
        st.lastUpdatedAt = new Date().toISOString();
      }
      return st.status === 'completed' ? { ...fields(taskId), result: finalResult(taskId) } : fields(taskId);
    });
    return server;
  };
  serveStdio(build, { onerror: (e) => console.error('task-server:', e?.message ?? e) });
} else {
  console.error('task-server: --era 2025-11-25 or --era 2026-07-28');
  process.exit(2);
}
