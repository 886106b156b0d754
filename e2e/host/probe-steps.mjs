// Steps both eras run against the probe server (servers/probe-server.mjs).

// probeArgs exercises what a proxy could get wrong with arguments: secrets (the
// report must redact them), unicode and escapes (bytes must pass unchanged), and a
// nested correlation-key name, which belongs to the tool and must arrive.
export function probeArgs(sess) {
  return {
    user: 'bob',
    password: sess.secret('p@ssw0rd!'),
    headers: { Authorization: `Bearer ${sess.secret('abc.def.ghi-secret-token')}` },
    text: 'héllo ✓ 🎉 \u2028 "q" \\ \t end',
    numbers: [0, -1.5, 1e21, 12345678901234],
    nested: { _bir_call_id: 'belongs-to-the-tool' },
    empty: {},
    nothing: null,
  };
}

// probeCancel cancels a call the probe server keeps open, then asks the server what it
// saw: the cancellation must have reached it, with the request id it got.
export async function probeCancel(sess, callFn) {
  await sess.step('slow cancelled by the host', async () => {
    const ac = new AbortController();
    const pending = callFn('slow', { ms: 600000, label: 'slow-1' }, {
      signal: ac.signal,
      onprogress: () => ac.abort('user pressed stop'),
    });
    await sess.expectError(() => pending);
  });
  // The notification and this call travel the same pipe in that order, and the server
  // records the abort before it handles the next request.
  await sess.step('cancellations (what the server saw)', () => callFn('cancellations', {}));
}

// probeSlow runs a slow call to its end, and then two calls at once, the later one
// answered first: the proxy must route each answer to its own request. The concurrent
// slow call asks for no progress, so nothing of it can interleave with the fast answer.
export async function probeSlow(sess, callFn) {
  await sess.step('slow that finishes (progress, then the result)', () =>
    callFn('slow', { ms: 200, label: 'slow-2' }, { onprogress: () => {} }),
  );
  await sess.step('two calls in flight, the second answered first', () =>
    Promise.all([callFn('slow', { ms: 300, label: 'slow-3' }), callFn('inspect-args', { concurrent: true })]),
  );
}
