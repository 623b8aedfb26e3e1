/**
 * Finding a free loopback port for local processes (wrangler dev, the sim engine).
 *
 * @module
 */
import { createServer } from "node:net";

/**
 * Asks the OS for a free TCP port on 127.0.0.1. There is a short window between closing the probe
 * and the real listener binding it; callers that start a child process retry on "address in use".
 *
 * @example
 * ```ts
 * const port = await freePort();
 * ```
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error("could not read the probe socket's port"));
        return;
      }
      const { port } = address;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Polls `url` until it answers (any HTTP status) or `timeoutMs` passes.
 *
 * @example
 * ```ts
 * await waitForHttp("http://127.0.0.1:8787/health", 30_000);
 * ```
 */
export async function waitForHttp(
  url: string,
  timeoutMs: number,
  isAlive: () => boolean = () => true,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (!isAlive()) throw new Error(`process serving ${url} exited before it was ready`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.body?.cancel();
      return;
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 150));
    }
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms (${String(lastError)})`);
}
