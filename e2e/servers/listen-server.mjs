#!/usr/bin/env node
// listen-server: an MCP server of the stateless era (2026-07-28) on the official SDK
// 2.4.0 (@modelcontextprotocol/server, serveStdio), for the listen-stream revival test.
// serveStdio answers `subscriptions/listen` itself (its StdioListenRouter) and puts the
// instance's own notifications/tools/list_changed on every stream that listens to
// tools. Two tools:
//
//   whoami          the server's pid, so the host can kill this process
//   add-tool NAME   registers a tool named NAME on the live instance; the SDK then
//                   emits notifications/tools/list_changed (McpServer.registerTool)
//
// Each process starts with only these two tools: a revived one has no NAME tool until
// add-tool is called on it.
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const build = () => {
  const server = new McpServer(
    { name: 'bir-e2e-listen', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.registerTool('whoami', { description: "The server's process id." }, async () => ({
    content: [{ type: 'text', text: String(process.pid) }],
  }));
  server.registerTool(
    'add-tool',
    { description: 'Registers a tool of the given name (the server then says its tool list changed).', inputSchema: z.object({ name: z.string() }) },
    async ({ name }) => {
      server.registerTool(name, { description: `Added by add-tool in process ${process.pid}.` }, async () => ({
        content: [{ type: 'text', text: `${name} in ${process.pid}` }],
      }));
      return { content: [{ type: 'text', text: `added ${name}` }] };
    },
  );
  return server;
};
serveStdio(build, { onerror: (e) => console.error('listen-server:', e?.message ?? e) });
