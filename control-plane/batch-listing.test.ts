/**
 * `GET /v1/batches` pages newest first by a cursor unique to each batch (`created_at` and
 * `batch_id`), so batches created in the same millisecond are neither skipped nor repeated.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { REGISTRY_NAME } from "./registry/registry-do";
import { getAsTrainer, postBatch, task, uniqueId } from "./testing/fixtures";

interface ListPage {
  batches: { batch_id: string; created_at: number }[];
  next_before: string | null;
}

async function list(query: string): Promise<ListPage> {
  const res = await getAsTrainer(`/v1/batches?${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as ListPage;
}

/** Every batch id from the newest down, page by page, following `next_before`. */
async function pageThrough(limit: number, stopAt: (id: string) => boolean): Promise<string[]> {
  const seen: string[] = [];
  let query = `limit=${limit}`;
  for (let pages = 0; pages < 100; pages++) {
    const page = await list(query);
    seen.push(...page.batches.map((b) => b.batch_id));
    if (page.next_before === null || page.batches.some((b) => stopAt(b.batch_id))) return seen;
    query = `limit=${limit}&before=${encodeURIComponent(page.next_before)}`;
  }
  throw new Error("more than 100 pages");
}

describe("GET /v1/batches paging", () => {
  it("pages through many batches created in the same millisecond with none lost or repeated", async () => {
    const registry = env.REGISTRY.getByName(REGISTRY_NAME);
    // Far in the future, so these are the newest batches of this file's registry.
    const same = 9_000_000_000_000;
    const prefix = uniqueId("same");
    const ids = Array.from({ length: 23 }, (_, i) => `${prefix}-${String(i).padStart(2, "0")}`);
    for (const id of ids) {
      await registry.recordBatch({ batch_id: id, queue: "default", tasks: 1, sessions: 1, created_at: same });
    }
    // One older and one newer neighbour, to see the boundaries kept in order.
    await registry.recordBatch({
      batch_id: `${prefix}-older`,
      queue: "q",
      tasks: 1,
      sessions: 1,
      created_at: same - 1,
    });
    await registry.recordBatch({
      batch_id: `${prefix}-newer`,
      queue: "q",
      tasks: 1,
      sessions: 1,
      created_at: same + 1,
    });
    for (const limit of [1, 4, 5, 23, 200]) {
      const seen = await pageThrough(limit, (id) => id === `${prefix}-older`);
      const ours = seen.filter((id) => id.startsWith(prefix));
      expect(new Set(ours).size).toBe(ours.length);
      expect(ours).toEqual([`${prefix}-newer`, ...[...ids].reverse(), `${prefix}-older`]);
    }
  });

  it("next_before is '<created_at>:<batch_id>' of the page's last batch, null on the last page", async () => {
    const queue = uniqueId("cursor");
    const a = uniqueId("b");
    expect((await postBatch({ batch_id: a, queue, tasks: [task("t")] })).status).toBe(201);
    const first = await list("limit=1");
    const last = first.batches[0]!;
    expect(first.next_before).toBe(`${last.created_at}:${last.batch_id}`);
    const everything = await list("limit=200");
    expect(everything.next_before).toBeNull();
  });

  it("still accepts a numeric before (created_at strictly older)", async () => {
    const registry = env.REGISTRY.getByName(REGISTRY_NAME);
    const prefix = uniqueId("num");
    const at = 8_000_000_000_000;
    await registry.recordBatch({
      batch_id: `${prefix}-a`,
      queue: "q",
      tasks: 1,
      sessions: 1,
      created_at: at,
    });
    await registry.recordBatch({
      batch_id: `${prefix}-b`,
      queue: "q",
      tasks: 1,
      sessions: 1,
      created_at: at - 1,
    });
    const page = await list(`limit=1&before=${at}`);
    expect(page.batches.map((b) => b.batch_id)).toEqual([`${prefix}-b`]);
  });

  it.each([["abc"], ["12:"], [":b_1"], ["-1:b_1"], ["12:bad id"]])(
    "refuses before=%s with a 400 naming the parameter",
    async (before) => {
      const res = await getAsTrainer(`/v1/batches?before=${encodeURIComponent(before)}`);
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("validation_failed");
      expect(body.error.message).toContain("before");
    },
  );
});
