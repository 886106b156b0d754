#!/usr/bin/env node
// listen-server: an MCP server of the stateless era (2026-07-28) on the official SDK
// 2.4.0 (@modelcontextprotocol/server), for the listen-stream tests. Two tools:
//
//   whoami          the server's pid, so the host can kill this process
//   add-tool NAME   registers a tool named NAME; the server then says its tool list
//                   changed on every open listen stream that listens to tools
//
// Each process starts with only these two tools: a new one has no NAME tool until
// add-tool is called on it.
//
// Over stdio (the default) serveStdio answers `subscriptions/listen` itself (its
// StdioListenRouter) and puts the one pinned instance's own
// notifications/tools/list_changed (McpServer.registerTool) on every stream.
//
// With --http PORT it is served over Streamable HTTP on 127.0.0.1 with the SDK's
// createMcpHandler: a new McpServer per request (the factory), and a
// `subscriptions/listen` POST answered by the handler's listen router with an SSE stream
// that stays open (the acknowledgment first, then the handler's bus). So a tool added in
// one request is remembered by the process (`added`, which the factory registers), and
// the change goes out by handler.notify.toolsChanged(), the SDK's way to reach the
// streams. The port is taken as soon as it is free (EADDRINUSE is retried every 10 ms
// for 30 s, after "listen-server: loaded" on stderr): a test can start the next server
// while the old one still holds the port, and kill the old one once this one is loaded.
// With --bind-on-stdin as well it takes the port only after a line on stdin: the test
// keeps the port closed (connections refused) for as long as it likes.
import { createServer } from 'node:http';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const httpAt = process.argv.indexOf('--http');
const overHTTP = httpAt >= 0;

// The tools add-tool registered in this process (over HTTP each request has its own
// McpServer, built with these).
const added = [];
let handler;

const build = () => {
  const server = new McpServer(
    { name: 'bir-e2e-listen', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  const register = (name) =>
    server.registerTool(name, { description: `Added by add-tool in process ${process.pid}.` }, async () => ({
      content: [{ type: 'text', text: `${name} in ${process.pid}` }],
    }));
  server.registerTool('whoami', { description: "The server's process id." }, async () => ({
    content: [{ type: 'text', text: String(process.pid) }],
  }));
  server.registerTool(
    'add-tool',
    { description: 'Registers a tool of the given name (the server then says its tool list changed).', inputSchema: z.object({ name: z.string() }) },
    async ({ name }) => {
      if (overHTTP) {
        added.push(name);
        handler.notify.toolsChanged();
      } else {
        register(name);
      }
      return { content: [{ type: 'text', text: `added ${name}` }] };
    },
  );
  for (const name of added) register(name);
  return server;
};

if (!overHTTP) {
  serveStdio(build, { onerror: (e) => console.error('listen-server:', e?.message ?? e) });
} else {
  const port = Number(process.argv[httpAt + 1] ?? process.env.PORT);
  handler = createMcpHandler(build, { onerror: (e) => console.error('listen-server:', e?.message ?? e) });
  // node:http to the handler's fetch face (Request in, Response out, its body streamed
  // as it comes: a listen stream's events reach the client one by one). A client that
  // closes the connection aborts the request (the listen router then ends the stream).
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (typeof v === 'string') headers.set(k, v);
    }
    const response = await handler.fetch(
      new Request(`http://127.0.0.1:${port}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks),
        signal: abort.signal,
      }),
    );
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
  const deadline = Date.now() + 30_000;
  server.on('error', (e) => {
    if (e.code === 'EADDRINUSE' && Date.now() < deadline) {
      setTimeout(() => server.listen(port, '127.0.0.1'), 10);
      return;
    }
    console.error('listen-server:', e.message);
    process.exit(1);
  });
  server.on('listening', () => console.error(`listen-server: pid ${process.pid} listening on http://127.0.0.1:${port}/mcp`));
  console.error(`listen-server: loaded (pid ${process.pid})`);
  if (process.argv.includes('--bind-on-stdin')) {
    process.stdin.once('data', () => {
      process.stdin.pause();
      server.listen(port, '127.0.0.1');
    });
  } else {
    server.listen(port, '127.0.0.1');
  }
  process.on('SIGTERM', () => process.exit(0));
}
