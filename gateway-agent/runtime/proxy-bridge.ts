/**
 * Host side of the sandbox's way to the proxy when it has no network: a Unix socket (bind-mounted
 * into the sandbox) whose connections are piped to the proxy's TCP port.
 *
 * @module
 */
import { rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

let counter = 0;

/** A listening bridge. */
export interface ProxyBridge {
  socketPath: string;
  close(): Promise<void>;
}

/**
 * Listens on a short Unix socket path (socket paths are limited to ~108 bytes, so not under the
 * session folder; `socketPath` overrides the default in the temp folder) and forwards to
 * `proxyUrl`'s host and port.
 *
 * @example
 * ```ts
 * const bridge = await startProxyBridge("http://127.0.0.1:41000");
 * // bwrap --bind bridge.socketPath /tmp/.polar-proxy.sock …
 * await bridge.close();
 * ```
 */
export async function startProxyBridge(
  proxyUrl: string,
  socketPath = path.join(tmpdir(), `polar-${process.pid}-${++counter}.sock`),
): Promise<ProxyBridge> {
  const target = new URL(proxyUrl);
  await rm(socketPath, { force: true });
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    const done = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", done).on("close", done);
    upstream.on("error", done).on("close", done);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, resolve);
  });
  return {
    socketPath,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(socketPath, { force: true });
    },
  };
}
