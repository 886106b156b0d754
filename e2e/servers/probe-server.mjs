#!/usr/bin/env node
// probe-server: a small MCP server on the official v2 server SDK, served with
// serveStdio so it speaks both eras (2025 session era when the host opens with
// initialize, the 2026-07-28 stateless era when it opens with server/discover). Its
// tools exist to make a proxy's effect visible from the host side: what arguments
// arrived, what the server saw of a cancellation, a multi round-trip, a slow call.
import { createServer } from 'node:http';
import { McpServer, inputRequired, acceptedContent, ProtocolError, ProtocolErrorCode, createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

// What the server observed of cancellations, across the one pinned instance.
const cancellations = [];

// The raw line of each request as it arrived on stdin, by id, so inspect-args can show
// the bytes the proxy forwarded and not only what they parse to. A second listener
// beside the SDK transport's sees the same chunks, before any handler runs.
const rawRequests = new Map();
let pending = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  let nl;
  while ((nl = pending.indexOf(0x0a)) >= 0) {
    const line = pending.subarray(0, nl).toString('utf8');
    pending = pending.subarray(nl + 1);
    try {
      const msg = JSON.parse(line);
      if (msg && msg.id !== undefined && msg.method !== undefined) {
        rawRequests.set(JSON.stringify(msg.id), line);
        if (rawRequests.size > 64) rawRequests.delete(rawRequests.keys().next().value);
      }
    } catch {
      // Not JSON: the SDK transport reports it; nothing to remember here.
    }
  }
});

function build() {
  const server = new McpServer({ name: 'bir-e2e-probe', version: '1.0.0' }, { capabilities: { tools: {} } });

  server.registerTool(
    'inspect-args',
    {
      description: 'Returns the arguments as the server parsed them, and the raw request line it received.',
      inputSchema: z.looseObject({}),
    },
    async (args, ctx) => ({
      content: [
        { type: 'text', text: JSON.stringify(args) },
        { type: 'text', text: rawRequests.get(JSON.stringify(ctx.mcpReq.id)) ?? '(raw line not seen)' },
      ],
      structuredContent: { received: args },
    }),
  );

  server.registerTool(
    'confirm',
    {
      description: 'Asks the user to confirm (multi round-trip elicitation), then echoes the answer.',
      inputSchema: z.object({ action: z.string() }),
    },
    async ({ action }, ctx) => {
      const answerSchema = z.object({ confirm: z.boolean(), note: z.string().optional() });
      const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', answerSchema);
      if (answer === undefined) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({ message: `Really ${action}?`, requestedSchema: answerSchema }),
          },
          requestState: `round-1:${action}`,
        });
      }
      return {
        content: [{ type: 'text', text: `${action}: confirm=${answer.confirm} note=${answer.note ?? ''} state=${ctx.mcpReq.requestState() ?? ''}` }],
      };
    },
  );

  server.registerTool(
    'slow',
    {
      description: 'Sends one progress notification, then waits until cancelled (or ms elapse).',
      inputSchema: z.object({ ms: z.number(), label: z.string() }),
    },
    async ({ ms, label }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      if (token !== undefined) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 0, total: 1, message: `${label} started` } });
      }
      const signal = ctx.mcpReq.signal;
      const outcome = await new Promise((resolve) => {
        const timer = setTimeout(() => resolve('finished'), ms);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve('cancelled');
        }, { once: true });
      });
      if (outcome === 'cancelled') {
        cancellations.push({ label, requestId: ctx.mcpReq.id, reason: String(signal.reason?.message ?? signal.reason ?? '') });
      }
      return { content: [{ type: 'text', text: `${label} ${outcome}` }] };
    },
  );

  server.registerTool(
    'cancellations',
    { description: 'Lists the cancellations this server has seen.', inputSchema: z.object({}) },
    async () => ({ content: [{ type: 'text', text: JSON.stringify(cancellations) }] }),
  );

  server.registerTool(
    'fail',
    { description: 'A tool error (isError result).', inputSchema: z.object({ why: z.string() }) },
    async ({ why }) => ({ isError: true, content: [{ type: 'text', text: `failed: ${why}` }] }),
  );

  server.registerTool(
    'reject',
    { description: 'A JSON-RPC error.', inputSchema: z.object({ why: z.string() }) },
    async ({ why }) => {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `rejected: ${why}`);
    },
  );

  server.registerTool(
    'big',
    { description: 'Returns a deterministic text of the given size in bytes.', inputSchema: z.object({ bytes: z.number() }) },
    async ({ bytes }) => {
      const unit = 'bir-proxy e2e ü 0123456789 ';
      let s = unit.repeat(Math.ceil(bytes / unit.length) + 1);
      s = Buffer.from(s, 'utf8').subarray(0, bytes).toString('utf8');
      return { content: [{ type: 'text', text: s }] };
    },
  );

  return server;
}

// With --http PORT (or --http and PORT in the environment) the same server is served over Streamable HTTP on 127.0.0.1 with the
// SDK's createMcpHandler (both eras: the 2026-07-28 stateless core, and 2025 requests
// by its stateless legacy fallback); the raw body of each POST is remembered as a
// stdin line is, and a client that closes the response stream aborts the request.
const httpAt = process.argv.indexOf('--http');
if (httpAt >= 0) {
  const port = Number(process.argv[httpAt + 1] ?? process.env.PORT);
  const handler = createMcpHandler(build);
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    try {
      const msg = JSON.parse(body.toString('utf8'));
      if (msg && msg.id !== undefined && msg.method !== undefined) {
        rawRequests.set(JSON.stringify(msg.id), body.toString('utf8'));
      }
    } catch {
      // not JSON: the handler answers it
    }
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === 'string') headers.set(k, v);
    }
    const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
      method: req.method,
      headers,
      body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
      signal: abort.signal,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) {
      res.end();
      return;
    }
    try {
      for await (const chunk of response.body) res.write(chunk);
    } catch {
      // the client went away
    }
    res.end();
  });
  server.listen(port, '127.0.0.1', () => console.error(`probe-server: listening on http://127.0.0.1:${port}/mcp`));
  process.on('SIGTERM', () => process.exit(0));
} else {
  serveStdio(build, { onerror: (e) => console.error('probe-server:', e?.message ?? e) });
}
