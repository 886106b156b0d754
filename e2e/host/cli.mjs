// What the two scripted hosts share: the command line the Go suite drives them with,
// the step bookkeeping, and writing the results even when a step fails (a transcript
// cut short still names the step where the runs parted).
import { Wire } from './wire.mjs';
import { CORRELATION_KEY } from './fingerprint.mjs';

// parseArgs reads:
//   --scenario NAME      which scenario to run
//   --transcript PATH    where the normalized transcript goes
//   --calls PATH         where the expected step reports go (JSON)
//   --call-ids           add the correlation key to every tools/call, as a host hook does
//   --tmp DIR            a per-run directory: the scenario's files, masked in the transcript
//   --env KEY=VALUE      set for the server command (repeatable)
//   --url URL            talk to a server over HTTP instead of starting a command
//   --url-transport T    with --url: http (Streamable HTTP, the default) or sse
//   --skip STEP          leave out the scenario step of that name (repeatable)
//   -- COMMAND ARGS...   the server command (possibly bir-proxy wrapping it)
export function parseArgs(argv) {
  const opts = { env: {}, callIds: false, tmp: '', command: [], url: '', urlTransport: 'http', skip: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--scenario': opts.scenario = next(); break;
      case '--transcript': opts.transcript = next(); break;
      case '--calls': opts.calls = next(); break;
      case '--call-ids': opts.callIds = true; break;
      case '--tmp': opts.tmp = next(); break;
      case '--env': {
        const kv = next();
        const eq = kv.indexOf('=');
        if (eq <= 0) throw new Error(`--env wants KEY=VALUE, got ${kv}`);
        opts.env[kv.slice(0, eq)] = kv.slice(eq + 1);
        break;
      }
      case '--url': opts.url = next(); break;
      case '--url-transport': opts.urlTransport = next(); break;
      case '--skip': opts.skip.push(next()); break;
      case '--': opts.command = argv.slice(i + 1); i = argv.length; break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!opts.scenario || (opts.command.length === 0) === !opts.url) {
    throw new Error('usage: --scenario NAME [--transcript F] [--calls F] [--call-ids] [--tmp DIR] [--env K=V]... (-- COMMAND... | --url URL [--url-transport http|sse])');
  }
  return opts;
}

// Session holds one scripted run: the wire, the step helper, the call-id counter.
export class Session {
  constructor(opts, wireOpts = {}) {
    this.opts = opts;
    this.wire = new Wire({ tmpDirs: [opts.tmp], ...wireOpts });
    this.secrets = [];
    this.nextCallId = 1;
  }

  log(msg) {
    process.stderr.write(`[host ${this.opts.scenario}] ${msg}\n`);
  }

  async step(name, fn) {
    if (this.opts.skip.includes(name)) {
      this.log(`step ${name} skipped (--skip)`);
      return undefined;
    }
    this.wire.begin(name);
    this.log(`step ${name}`);
    try {
      return await fn();
    } catch (err) {
      err.step ??= name;
      throw err;
    }
  }

  // args adds the correlation key the way a host hook does: one more argument. It goes
  // first in every other call and last in the rest, so removing it must take the comma
  // on either side; the direct run's line (no key) is what the server must receive.
  args(obj) {
    if (!this.opts.callIds) {
      return obj;
    }
    const n = this.nextCallId++;
    const id = `${this.opts.scenario}-${n}`;
    return n % 2 === 1 ? { [CORRELATION_KEY]: id, ...obj } : { ...obj, [CORRELATION_KEY]: id };
  }

  // note puts a host-side observation (an SDK-level outcome) into the transcript.
  note(text) {
    this.wire.entries.push({ step: this.wire.step, dir: '!!', text: this.wire.mask(text) });
  }

  // expectError runs fn, which must throw, and notes what the SDK made of the answer.
  async expectError(fn) {
    try {
      const got = await fn();
      throw new Error(`expected an error, got ${JSON.stringify(got)}`);
    } catch (err) {
      if (err.message?.startsWith('expected an error')) throw err;
      this.note(`error ${err.code ?? ''} ${err.message}`);
      return err;
    }
  }

  secret(s) {
    this.secrets.push(s);
    return s;
  }
}

// main runs a scenario and always writes what it saw; exit 1 names the failed step.
export async function main(opts, session, run) {
  let failed;
  try {
    await run();
  } catch (err) {
    failed = err;
  }
  session.wire.write({ transcriptPath: opts.transcript, callsPath: opts.calls, secrets: session.secrets, extra: session.extra });
  if (failed) {
    session.log(`FAILED in step "${failed.step ?? session.wire.step}": ${failed.stack ?? failed}`);
    process.exit(1);
  }
  session.log('done');
  // Leftover handles (an SDK timer, a child that ignored SIGTERM) must not keep a
  // finished host alive: the Go side waits for this process.
  process.exit(0);
}
