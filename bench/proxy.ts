/**
 * `npm run bench:proxy`: what the recording proxy costs. Against the simulated engine with zero
 * latency, it measures per-call latency (p50/p99, sequential calls) and throughput (completions/s
 * with concurrent clients) calling the engine directly and through the proxy, non-streaming and
 * streaming, and prints them side by side with the ratios.
 *
 * Env: BENCH_CALLS (sequential calls per row, default 300), BENCH_SECONDS (throughput window,
 * default 3), BENCH_CONCURRENCY (default 32), BENCH_METRICS=1 (the proxy counts into prom-client
 * families, as on a gateway).
 */
import { performance } from "node:perf_hooks";
import { Registry } from "prom-client";
import { PromProxyMetrics } from "../proxy/metrics-prom";
import { startProxy } from "../proxy/server";
import { startSimEngine } from "../sim/server";

const MODEL = "Qwen/Qwen3-0.6B";
const CALLS = Number(process.env.BENCH_CALLS ?? 300);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const METRICS = process.env.BENCH_METRICS === "1";
const messages = [{ role: "user", content: "What is 17 * 23?" }];

async function call(url: string, key: string, stream: boolean, direct: boolean): Promise<void> {
  const body = direct
    ? {
        model: MODEL,
        messages,
        stream,
        ...(stream ? {} : { logprobs: true, return_prompt_token_ids: true, return_meta_info: true }),
      }
    : { model: "client-model", messages, stream };
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "x-smg-routing-key": key },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
}

const signed = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(2)}`;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function latency(fn: () => Promise<void>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < 20; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { p50: pct(times, 50), p99: pct(times, 99) };
}

async function throughput(fn: () => Promise<void>): Promise<number> {
  const until = performance.now() + SECONDS * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        await fn();
        done++;
      }
    }),
  );
  return done / SECONDS;
}

async function main(): Promise<void> {
  const sim = await startSimEngine({ model: MODEL });
  const quiet = { info() {}, warn() {}, error() {} };
  // Records are bounded per session; one session per row keeps the bench under the cap.
  const metrics = new PromProxyMetrics();
  const proxy = await startProxy({
    engine: "sglang-openai",
    engineUrl: sim.url,
    modelServed: MODEL,
    logger: quiet,
    maxRecordsPerSession: 10_000_000,
    ...(METRICS ? { metrics } : {}),
  });
  if (METRICS) metrics.register(new Registry(), () => proxy.status());
  const rows: string[][] = [];
  let s = 0;
  for (const stream of [false, true]) {
    const key = proxy.openSession(`bench-${s++}`).key;
    const direct = () => call(sim.url, "direct", stream, true);
    const viaProxy = () => call(proxy.url, key, stream, false);
    const d = await latency(direct);
    const p = await latency(viaProxy);
    const dt = await throughput(direct);
    const pt = await throughput(viaProxy);
    const mode = stream ? "streaming" : "non-streaming";
    rows.push([
      `${mode} p50 latency (ms)`,
      d.p50.toFixed(2),
      p.p50.toFixed(2),
      signed(p.p50 - d.p50),
      (p.p50 / d.p50).toFixed(2),
    ]);
    rows.push([
      `${mode} p99 latency (ms)`,
      d.p99.toFixed(2),
      p.p99.toFixed(2),
      signed(p.p99 - d.p99),
      (p.p99 / d.p99).toFixed(2),
    ]);
    rows.push([
      `${mode} completions/s (c=${CONCURRENCY})`,
      dt.toFixed(0),
      pt.toFixed(0),
      (pt - dt).toFixed(0),
      (pt / dt).toFixed(2),
    ]);
  }
  await proxy.close();
  await sim.close();
  const header = ["metric", "direct (sim engine)", "through proxy", "difference", "ratio"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  console.log(
    `proxy benchmark: sglang-openai engine (simulated, zero latency), ${CALLS} sequential calls per latency row, ${SECONDS}s throughput windows`,
  );
  console.log(line(header));
  console.log(line(widths.map((w) => "-".repeat(w))));
  for (const r of rows) console.log(line(r));
  console.log(
    "Streaming through the proxy is synthesised from one non-streaming engine call (SGLang returns token ids only there).",
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
