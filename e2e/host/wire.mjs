// The scripted hosts' view of the wire. It records every line the server side wrote,
// byte for byte (before the SDK parses it), and every message the host sent, tagged
// with the scenario step that was open, and renders them as a normalized transcript:
// the suite compares transcripts of a direct run and a run through the proxy, so the
// raw lines are the evidence and masking is kept to values that differ between two
// honest runs (clock readings, random ids, temp paths).
import { writeFileSync } from 'node:fs';
import { CORRELATION_KEY, fingerprint } from './fingerprint.mjs';

const WAIT_LIMIT_MS = 60_000;

export class Wire {
  constructor({ tmpDirs = [], periodic = [], rewrite = [] } = {}) {
    this.entries = [];
    this.step = 'start';
    this.steps = ['start'];
    this.tmpDirs = tmpDirs.filter(Boolean);
    // Lines a server repeats on its own clock (interval timers): how many arrive
    // depends on how long a step took, so they are shown once, as a set. Each entry
    // is a predicate over the masked line, so only exact expected bytes qualify.
    this.periodic = periodic;
    this.periodicSeen = new Set();
    // Lines whose content a server draws at random from a fixed set: each rewrite
    // returns the line's stand-in only when the line is one of the exact expected
    // lines, so a changed byte still shows.
    this.rewrite = rewrite;
    this.pending = Buffer.alloc(0);
    this.waiters = [];
    this.outgoing = [];
    this.received = [];
    this.connections = 0;
  }

  // tap hooks an official StdioClientTransport: outgoing messages through send(),
  // incoming bytes through a second listener on the child's stdout, next to the SDK's.
  tap(transport) {
    // Each tapped transport is one connection; request ids start over in each.
    const conn = ++this.connections;
    const start = transport.start.bind(transport);
    transport.start = async () => {
      await start();
      const child = transport._process;
      if (!child?.stdout) {
        // A renamed private field would otherwise make every transcript empty
        // and every comparison pass.
        throw new Error('wire tap: StdioClientTransport has no _process.stdout (SDK internals changed)');
      }
      this.pending = Buffer.alloc(0);
      child.stdout.on('data', (chunk) => this.onChunk(conn, chunk));
      child.stdout.on('end', () => this.onEnd());
      this.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    };
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      this.onSend(conn, message);
      return send(message, options);
    };
    return transport;
  }

  // fetch returns a fetch for an official HTTP client transport that records every
  // message the server side sent as its raw bytes, before the SDK parses it: a JSON
  // answer's body, and each event's data of an event stream, recorded as its event
  // completes and before the SDK is handed the bytes (so a message is in the step
  // during which the SDK got it, as with a stdio tap). tapSend then records what the
  // host sent, as tap does.
  fetch(conn) {
    return async (url, init) => {
      const res = await fetch(url, init);
      const type = res.headers.get('content-type') ?? '';
      if (!res.body || !res.ok) {
        return res;
      }
      if (type.includes('text/event-stream')) {
        const reader = res.body.getReader();
        const events = this.eventReader(conn);
        const body = new ReadableStream({
          async pull(controller) {
            let chunk;
            try {
              chunk = await reader.read();
            } catch (err) {
              controller.error(err);
              return;
            }
            if (chunk.done) {
              controller.close();
              return;
            }
            events(chunk.value);
            controller.enqueue(chunk.value);
          },
          cancel(reason) {
            return reader.cancel(reason);
          },
        });
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      }
      if (type.includes('application/json')) {
        const body = Buffer.from(await res.arrayBuffer());
        this.onLine(conn, body.toString('utf8'));
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      }
      return res;
    };
  }

  // eventReader returns a function fed the chunks of an SSE body that records the data
  // of each event as it completes (lines joined by LF, as the standard says), skipping
  // the "endpoint" event of the HTTP+SSE transport and events with no data.
  eventReader(conn) {
    let pending = '';
    const decoder = new TextDecoder();
    const dispatch = (block) => {
      let name = '';
      const data = [];
      for (const line of block.split(/\r\n|\r|\n/)) {
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        let value = i < 0 ? '' : line.slice(i + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') data.push(value);
        if (field === 'event') name = value;
      }
      if (data.join('\n') !== '' && (name === '' || name === 'message')) {
        this.onLine(conn, data.join('\n'));
      }
    };
    return (chunk) => {
      pending += decoder.decode(chunk, { stream: true });
      let m;
      while ((m = /\r\n\r\n|\n\n|\r\r/.exec(pending))) {
        dispatch(pending.slice(0, m.index));
        pending = pending.slice(m.index + m[0].length);
      }
    };
  }

  // tapSend records what the host sends on an HTTP client transport.
  tapSend(transport) {
    const conn = ++this.connections;
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      this.onSend(conn, message);
      return send(message, options);
    };
    return { transport, conn };
  }

  begin(step) {
    this.step = step;
    this.steps.push(step);
  }

  onSend(conn, message) {
    this.outgoing.push({ conn, msg: message });
    let shown = message;
    const args = message?.params?.arguments;
    if (message?.method === 'tools/call' && args && Object.hasOwn(args, CORRELATION_KEY)) {
      // The key is the one thing a proxied run sends that the direct run does not;
      // the transcript shows the message as the server should have received it.
      const { [CORRELATION_KEY]: _drop, ...rest } = args;
      shown = { ...message, params: { ...message.params, arguments: rest } };
    }
    this.entries.push({ step: this.step, dir: '->', text: this.mask(JSON.stringify(shown)) });
  }

  onChunk(conn, chunk) {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    let nl;
    while ((nl = this.pending.indexOf(0x0a)) >= 0) {
      const line = this.pending.subarray(0, nl);
      this.pending = this.pending.subarray(nl + 1);
      this.onLine(conn, line.toString('utf8'));
    }
  }

  onEnd() {
    if (this.pending.length) {
      this.entries.push({ step: this.step, dir: '<-', text: '<unterminated> ' + this.pending.toString('utf8') });
      this.pending = Buffer.alloc(0);
    }
  }

  onLine(conn, text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      msg = undefined;
    }
    this.received.push({ conn, msg });
    let masked = this.mask(text);
    for (const r of this.rewrite) {
      const to = r(masked);
      if (to !== undefined) {
        masked = to;
        break;
      }
    }
    if (this.periodic.some((p) => p(masked))) {
      this.periodicSeen.add(masked);
    } else {
      this.entries.push({ step: this.step, dir: '<-', text: masked });
    }
    for (const w of [...this.waiters]) {
      if (msg !== undefined && w.pred(msg)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(msg);
      }
    }
  }

  // waitFor resolves with the first message from the server side, already received or
  // still to come, that satisfies pred; the scenario waits on events, never on a clock.
  // The limit only turns a message that never comes into a failure that names what was
  // awaited (the SDK bounds its own requests the same way) instead of a hung host.
  waitFor(pred, { since = 0, what = 'a message' } = {}) {
    const got = this.received.slice(since).find(({ msg }) => msg !== undefined && pred(msg));
    if (got) {
      return Promise.resolve(got.msg);
    }
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      this.waiters.push(w);
      setTimeout(() => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) {
          this.waiters.splice(i, 1);
          reject(new Error(`still waiting for ${what} after ${WAIT_LIMIT_MS / 1000} s`));
        }
      }, WAIT_LIMIT_MS).unref();
    });
  }

  mark() {
    return this.received.length;
  }

  mask(text) {
    let t = text;
    // The CR of a CRLF the relay introduced must not vanish into the line split.
    t = t.replace(/\r/g, '<CR>');
    for (const dir of this.tmpDirs) {
      t = t.split(dir).join('<TMP>');
    }
    // Base64 payloads that decode to text with a clock reading in it (server-everything's
    // dynamic blob resources): decoded, masked, and shown decoded; only when the
    // encoding is canonical, so no changed character can hide behind the decoding.
    t = t.replace(/"(blob|data)":"([A-Za-z0-9+/]+={0,2})"/g, (whole, key, b64) => {
      const raw = Buffer.from(b64, 'base64');
      if (raw.toString('base64') !== b64) {
        return whole;
      }
      const decoded = raw.toString('utf8');
      if (Buffer.from(decoded, 'utf8').toString('base64') !== b64 || /[\u0000-\u0008\u000e-\u001f\ufffd]/.test(decoded)) {
        return whole;
      }
      const m = maskClock(decoded);
      return m === decoded ? whole : `"${key}":"<base64 of ${JSON.stringify(m).slice(1, -1)}>"`;
    });
    t = maskClock(t);
    t = t.replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, '<UUID>');
    return t;
  }

  // calls derives, from the host's own traffic, the step reports a correct proxy
  // must produce: one per tools/call request, its outcome from what came back.
  calls() {
    const key = (conn, id) => `${conn}:${JSON.stringify(id)}`;
    const responses = new Map();
    for (const { conn, msg } of this.received) {
      if (msg && msg.id !== undefined && msg.method === undefined) {
        responses.set(key(conn, msg.id), msg);
      }
    }
    const cancelled = new Set(
      this.outgoing
        .filter(({ msg }) => msg.method === 'notifications/cancelled')
        .map(({ conn, msg }) => key(conn, msg.params?.requestId)),
    );
    const out = [];
    for (const { conn, msg } of this.outgoing) {
      if (msg.method !== 'tools/call' || msg.id === undefined) {
        continue;
      }
      const k = key(conn, msg.id);
      const args = msg.params?.arguments;
      const callId = args && Object.hasOwn(args, CORRELATION_KEY) ? args[CORRELATION_KEY] : null;
      const resp = responses.get(k);
      let outcome;
      if (resp === undefined) {
        outcome = cancelled.has(k) ? 'cancelled' : 'no_response';
      } else if (cancelled.has(k)) {
        // The server answered before the cancellation won the race; a proxy may
        // report either, so the scenario must not create this case.
        outcome = 'cancel_raced';
      } else if (resp.error !== undefined) {
        outcome = 'rpc_error';
      } else if (resp.result?.resultType === 'input_required') {
        outcome = 'input_required';
      } else if (resp.result?.isError === true) {
        outcome = 'tool_error';
      } else {
        outcome = 'ok';
      }
      out.push({ connection: conn, requestId: msg.id, tool: msg.params?.name, callId, argsFingerprint: fingerprint(args), outcome });
    }
    return out;
  }

  transcript() {
    const lines = [];
    for (const step of this.steps) {
      const es = this.entries.filter((e) => e.step === step);
      if (es.length === 0 && step === 'start') {
        continue;
      }
      lines.push(`== ${step}`);
      for (const e of es) {
        lines.push(`${e.dir} ${e.text}`);
      }
    }
    if (this.periodicSeen.size) {
      lines.push('== periodic (each line once, in sorted order)');
      for (const t of [...this.periodicSeen].sort()) {
        lines.push(`<- ${t}`);
      }
    }
    return lines.join('\n') + '\n';
  }

  // extra: more members of the calls file, from a host that has more to say (task-host).
  write({ transcriptPath, callsPath, secrets = [], extra = {} }) {
    if (transcriptPath) {
      writeFileSync(transcriptPath, this.transcript());
    }
    if (callsPath) {
      writeFileSync(callsPath, JSON.stringify({ ...extra, calls: this.calls(), secrets }, null, 2) + '\n');
    }
  }
}

// maskClock hides clock readings: ISO 8601 instants and the locale time strings
// server-everything puts into its dynamic resources.
export function maskClock(s) {
  return s
    .replace(/\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{2} \d{4} \d{2}:\d{2}:\d{2} GMT[+-]\d{4}( \([^)]*\))?/g, '<TIME>')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?/g, '<TIME>')
    .replace(/\b\d{1,2}:\d{2}:\d{2}(\s|\u202f)?[AP]M\b/g, '<TIME>');
}
