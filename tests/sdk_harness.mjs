// What the SDK end-to-end tests (openai_sdk_test.mjs, anthropic_sdk_test.mjs) share: loading an
// npm package that scripts/setup.sh fetched (exit 77, SKIPPED, when it is absent), `check` with
// the list of failures, and a `radixlm serve -m random:tiny` on a free port for the test's body.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// The module at third_party_data/npm/node_modules/<entry>, or exit 77 naming the package.
export async function loadPackage(entry, name) {
  const file = path.join(process.env.RADIXLM_SOURCE_DIR || path.join(here, '..'), 'third_party_data/npm/node_modules', entry);
  if (!existsSync(file)) {
    console.log(`SKIPPED: the ${name} npm package is not installed (scripts/setup.sh fetches it)`);
    process.exit(77);
  }
  return import(pathToFileURL(file).href);
}

export const failures = [];
export function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) failures.push(what);
}

const freePort = () => new Promise((resolve) => {
  const s = createServer();
  s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

async function waitReady(base) {
  for (let i = 0; i < 600; ++i) {
    try { if ((await fetch(base + '/health')).ok) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not start');
}

// Serves random:tiny with `binary`, runs body(base), stops the server, prints the verdict and
// exits 1 on any failure (an exception out of body is one).
export async function withServer(binary, body) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const server = spawn(binary, ['serve', '-m', 'random:tiny', '--port', String(port)], { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await waitReady(base);
    await body(base);
  } catch (e) {
    check(false, 'unexpected error: ' + (e.stack || e));
  } finally {
    server.kill('SIGTERM');
  }
  console.log(failures.length ? `FAILED: ${failures.length}` : 'all passed');
  process.exit(failures.length ? 1 : 0);
}
