import { afterEach, describe, expect, it } from "vitest";
import { resetAuthThrottle, throttleKey } from "./auth-throttle";
import { call, TOKENS } from "./testing/fixtures";

/** A GET of a trainer route from `ip` with `token`, as Cloudflare's edge would pass it on. */
function from(ip: string | null, token: string, path = "/v1/batches"): Promise<Response> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  if (ip !== null) headers["CF-Connecting-IP"] = ip;
  return call(path, { headers });
}

afterEach(() => resetAuthThrottle());

/** The rate limiting binding's period (wrangler.toml). */
const PERIOD_MS = 60_000;

/**
 * Waits, when less than 20 s of the limiter's current period is left, for the next one. The
 * binding counts in fixed windows of the period aligned to the epoch (miniflare's ratelimit
 * worker: `Math.floor(Date.now() / period)`), so a run of failures that crossed a window's end
 * was counted in two windows and tripped nothing on a slow machine.
 */
async function freshWindow(): Promise<void> {
  const left = PERIOD_MS - (Date.now() % PERIOD_MS);
  if (left < 20_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

describe("failed authentications are throttled per source (wrangler.toml: 30 per 60 s)", () => {
  it("the 31st bad token from one address blocks it with 429, even with a good token; others are untouched", async () => {
    await freshWindow();
    const ip = "203.0.113.7";
    for (let i = 0; i < 30; i++) expect((await from(ip, `wrong-${i}`)).status).toBe(401);
    // The limiter allows 30 in the period: the 31st failure is answered (401) and trips the block.
    expect((await from(ip, "wrong-30")).status).toBe(401);
    const blocked = await from(ip, TOKENS.trainer);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get("Retry-After"))).toBeGreaterThan(0);
    expect(await blocked.json()).toMatchObject({ error: { code: "too_many_auth_failures" } });
    // A path credential from the blocked address is refused before it is checked.
    expect((await call("/u/anything/health", { headers: { "CF-Connecting-IP": ip } })).status).toBe(429);
    // Another source, and the same IPv4 written as an IPv4-mapped IPv6 address is the same source.
    expect((await from("198.51.100.9", TOKENS.trainer)).status).toBe(200);
    expect((await from("::ffff:203.0.113.7", TOKENS.trainer)).status).toBe(429);
  });

  it("wrong path credentials under /u/… count as failures too", async () => {
    await freshWindow();
    const ip = "203.0.113.8";
    for (let i = 0; i < 31; i++)
      expect((await call(`/u/wrong-${i}/health`, { headers: { "CF-Connecting-IP": ip } })).status).toBe(401);
    expect((await from(ip, TOKENS.trainer)).status).toBe(429);
  });

  it("bad X-Polar-Control-Token headers and bad gateway tokens on the WebSocket route count too", async () => {
    await freshWindow();
    const ip = "203.0.113.10";
    for (let i = 0; i < 16; i++) {
      const res = await call("/rollout/status", {
        headers: { "CF-Connecting-IP": ip, "X-Polar-Control-Token": `wrong-${i}` },
      });
      expect(res.status).toBe(401);
    }
    for (let i = 0; i < 15; i++) {
      const res = await call("/v1/gateways/connect?queue=q", {
        headers: {
          "CF-Connecting-IP": ip,
          Upgrade: "websocket",
          Authorization: `Bearer gw_node-${i}.AAAAAAAAAAAAAAAAAAAAAAAA`,
        },
      });
      expect(res.status).toBe(401);
    }
    // 31 failures: the source is blocked, for the right gateway token as for anything else.
    const blocked = await call("/v1/gateways/connect?queue=q", {
      headers: { "CF-Connecting-IP": ip, Upgrade: "websocket", Authorization: `Bearer ${TOKENS.gateway}` },
    });
    expect(blocked.status).toBe(429);
  });

  it("successes do not count, and a source without CF-Connecting-IP or on loopback is never throttled", async () => {
    for (let i = 0; i < 40; i++) expect((await from("203.0.113.9", TOKENS.trainer)).status).toBe(200);
    expect((await from("203.0.113.9", TOKENS.trainer)).status).toBe(200);
    for (const ip of [null, "127.0.0.1", "::1"]) {
      for (let i = 0; i < 35; i++) expect((await from(ip, `wrong-${i}`)).status).toBe(401);
      expect((await from(ip, TOKENS.trainer)).status).toBe(200);
    }
  });

  it("throttleKey normalises addresses and skips loopback", () => {
    expect(throttleKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(throttleKey(" 2001:db8::1 ")).toBe("2001:db8::1");
    expect(throttleKey("127.0.0.5")).toBeNull();
    expect(throttleKey("")).toBeNull();
  });
});
