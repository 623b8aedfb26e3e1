/**
 * The trainer side of `npm run bench:results`, run as its own process so its memory is its own:
 * reads every result of one batch, by cursor pages or by the SSE stream, parses each result's
 * JSON as a trainer would, and prints one JSON line: results, bytes, seconds, peak resident memory.
 *
 *   tsx bench/results-reader.ts --url URL --token T --batch ID --mode cursor|sse
 *
 * @module
 */
import { parseArgs } from "node:util";
import { EventSourceParserStream } from "eventsource-parser/stream";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    token: { type: "string" },
    batch: { type: "string" },
    mode: { type: "string", default: "cursor" },
  },
});
const { url, token, batch, mode } = values;
if (!url || !token || !batch) throw new Error("--url, --token and --batch are required");
if (mode !== "cursor" && mode !== "sse") throw new Error(`--mode must be cursor or sse, got ${mode}`);
const auth = { Authorization: `Bearer ${token}` };
const base = `${url}/v1/batches/${encodeURIComponent(batch)}/results`;

/** Tokens of a parsed result (prompt + response ids of every trace): proof the JSON was read. */
function tokensOf(result: { trajectory?: { traces?: { prompt_ids: number[]; response_ids: number[] }[] } }) {
  let n = 0;
  for (const t of result.trajectory?.traces ?? []) n += t.prompt_ids.length + t.response_ids.length;
  return n;
}

async function byCursor(): Promise<{ results: number; bytes: number; tokens: number }> {
  let after = 0;
  let results = 0;
  let bytes = 0;
  let tokens = 0;
  for (;;) {
    const res = await fetch(`${base}?after=${after}&limit=500`, { headers: auth });
    if (!res.ok) throw new Error(`GET results: ${res.status} ${await res.text()}`);
    const text = await res.text();
    bytes += Buffer.byteLength(text);
    const page = JSON.parse(text) as {
      results: { seq: number; result: never }[];
      next: number;
      done: boolean;
    };
    for (const r of page.results) tokens += tokensOf(r.result);
    results += page.results.length;
    after = page.next;
    if (page.done && page.results.length === 0) return { results, bytes, tokens };
  }
}

async function bySse(): Promise<{ results: number; bytes: number; tokens: number }> {
  const res = await fetch(base, { headers: { ...auth, Accept: "text/event-stream" } });
  if (!res.ok || !res.body) throw new Error(`GET results (SSE): ${res.status} ${await res.text()}`);
  let results = 0;
  let bytes = 0;
  let tokens = 0;
  const counted = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        bytes += chunk.byteLength;
        controller.enqueue(chunk);
      },
    }),
  );
  const events = counted.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const event of events) {
    if (event.event === "done") break;
    if (event.event !== "result") continue;
    const r = JSON.parse(event.data) as { result: never };
    tokens += tokensOf(r.result);
    results++;
  }
  return { results, bytes, tokens };
}

const t0 = performance.now();
const read = mode === "cursor" ? await byCursor() : await bySse();
const seconds = (performance.now() - t0) / 1000;
console.log(
  JSON.stringify({
    mode,
    ...read,
    seconds,
    // Peak resident set of this process (kilobytes on Linux).
    max_rss_mib: process.resourceUsage().maxRSS / 1024,
  }),
);
