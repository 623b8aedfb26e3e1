#!/usr/bin/env node
// The session of the fault matrix (test/faults/): like any harness it only knows OPENAI_BASE_URL
// and OPENAI_API_KEY. From (seed, POLAR_SESSION_ID) it draws how long it works (1 s to
// --max-seconds, 20 by default) and how
// many model calls it makes (1–3), so every attempt of a session does the same work and the check
// knows how many completion records a COMPLETED session must have. It sleeps between the calls
// and exits 0; a call that fails (after the proxy's own retries) exits 1. `--hang` sleeps forever
// (its session ends TIMEOUT).
//
//   node agent.mjs --seed S [--max-seconds N] [--hang]

/**
 * The work of one session: `calls` model calls spread over `seconds`.
 *
 * @param {number} seed
 * @param {string} sessionId
 * @param {number} [maxSeconds] longest it works (at least 1)
 * @returns {{ calls: number, seconds: number }}
 */
export function plan(seed, sessionId, maxSeconds = 20) {
  // mulberry32 over an FNV-1a hash of (seed, session id).
  let h = 2166136261;
  for (const c of `${seed}:${sessionId}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  const next = () => {
    h = (h + 0x6d2b79f5) >>> 0;
    let t = h;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { calls: 1 + Math.floor(next() * 3), seconds: 1 + next() * Math.max(0, maxSeconds - 1) };
}

async function main() {
  const args = process.argv.slice(2);
  const flag = (name, fallback) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : fallback);
  const seed = flag("--seed", 0);
  const maxSeconds = flag("--max-seconds", 20);
  const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));
  if (args.includes("--hang")) {
    for (;;) await sleep(3600);
  }
  const base = process.env.OPENAI_BASE_URL;
  const key = process.env.OPENAI_API_KEY;
  const session = process.env.POLAR_SESSION_ID ?? "";
  if (!base || !key) {
    console.error("OPENAI_BASE_URL and OPENAI_API_KEY must be set");
    process.exit(2);
  }
  const { calls, seconds } = plan(seed, session, maxSeconds);
  const pause = seconds / (calls + 1);
  for (let i = 0; i < calls; i++) {
    await sleep(pause);
    const res = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        messages: [{ role: "user", content: `What is ${i + 2} + ${i + 3}?` }],
        max_tokens: 64,
      }),
    });
    if (!res.ok) {
      console.error(`call ${i + 1} of ${calls} failed: HTTP ${res.status} ${await res.text()}`);
      process.exit(1);
    }
    await res.json();
  }
  await sleep(pause);
  console.log(`done: ${calls} calls in ${seconds.toFixed(1)} s`);
}

// Imported by the check (for `plan`), run as the harness.
if (import.meta.url === `file://${process.argv[1]}`) await main();
