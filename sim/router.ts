/**
 * A simulated SGLang router (model gateway) in front of sim engines, for tests of router support:
 * `GET /workers` lists the workers (`{workers: [{id, url, worker_type, is_healthy}], total}`), and
 * `POST /v1/chat/completions` goes to the worker chosen by `X-SMG-Routing-Key` (consistent hashing,
 * as slime configures it for multi-turn agents). Like the real router's typed chat path, it drops
 * SGLang's top-level token extension `prompt_token_ids` from chat responses — the reason a
 * recording proxy calls the workers directly once it has discovered them.
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { hash32 } from "./policy";

/** A running simulated router. */
export interface SimRouterHandle {
  url: string;
  /** Chat requests forwarded, per worker URL. */
  forwarded: Map<string, number>;
  close(): Promise<void>;
}

/**
 * Starts the router on 127.0.0.1 (port 0 by default).
 *
 * @example
 * ```ts
 * const router = await startSimRouter({ workers: [a.url, b.url] });
 * await fetch(`${router.url}/workers`);
 * await router.close();
 * ```
 */
export async function startSimRouter(opts: { workers: string[]; port?: number }): Promise<SimRouterHandle> {
  const forwarded = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0];
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      if (req.method === "GET" && path === "/workers") {
        json(200, {
          workers: opts.workers.map((url, i) => ({
            id: `worker-${i}`,
            url,
            worker_type: "regular",
            is_healthy: true,
          })),
          total: opts.workers.length,
        });
        return;
      }
      if (req.method === "GET" && path === "/health") {
        res.writeHead(200).end();
        return;
      }
      if (req.method === "POST" && path === "/v1/chat/completions") {
        const key = String(req.headers["x-smg-routing-key"] ?? "");
        const worker = opts.workers[hash32(key) % opts.workers.length]!;
        forwarded.set(worker, (forwarded.get(worker) ?? 0) + 1);
        fetch(`${worker}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: Buffer.concat(chunks),
        })
          .then(async (r) => {
            const body = (await r.json()) as { choices?: Array<Record<string, unknown>> };
            for (const c of body.choices ?? []) delete c.prompt_token_ids;
            json(r.status, body);
          })
          .catch((error: unknown) => json(502, { error: { message: `worker ${worker}: ${String(error)}` } }));
        return;
      }
      json(404, { error: { message: `no route ${path}` } });
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    forwarded,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
