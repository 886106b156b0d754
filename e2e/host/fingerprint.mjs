// The host side of SPEC §3.2: what a host hook computes over `tool_input`, so the
// suite can hold the proxy's argsFingerprint against an independent implementation.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import canonicalize from 'canonicalize';

export const CORRELATION_KEY = '_bir_call_id';

// fingerprint hashes arguments the way the host hook does: the hook sees the
// arguments without the correlation key, parsed with JSON.parse, and absent or null
// arguments as an empty tool_input.
export function fingerprint(args) {
  let value = args;
  if (value === undefined || value === null) {
    value = {};
  }
  if (typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, CORRELATION_KEY)) {
    value = { ...value };
    delete value[CORRELATION_KEY];
  }
  return 'sha256:' + createHash('sha256').update(canonicalize(value), 'utf8').digest('hex');
}

// Run as a script, it checks itself against the shared vectors and prints one line per
// mismatch, so the Go suite can prove the reference it trusts is right before using it.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  const { vectors } = JSON.parse(readFileSync(file, 'utf8'));
  let bad = 0;
  for (const [i, v] of vectors.entries()) {
    const got = fingerprint(JSON.parse(v.arguments));
    if (got !== v.fingerprint) {
      bad++;
      console.log(`vector ${i}: arguments ${v.arguments}: got ${got}, want ${v.fingerprint}`);
    }
  }
  console.log(`${vectors.length - bad} passed, ${bad} failed`);
  process.exitCode = bad === 0 ? 0 : 1;
}
