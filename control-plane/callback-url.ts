/**
 * Policy for trainer callback URLs. By default the control plane refuses loopback, private,
 * link-local and internal host names, so a trainer cannot make it call into the network it runs in
 * (SSRF). They are allowed under `polar dev` (`POLAR_DEV_MODE=1`) and where the operator allows
 * them (`POLAR_ALLOW_PRIVATE_CALLBACKS=1`: a control plane that runs inside the trainers' network,
 * e.g. `wrangler dev` or workerd next to the cluster, where upstream's bridge listens on the
 * trainer host). Only literal addresses and well-known names can be checked: Workers have no DNS
 * lookup API, and a deployed Worker's own `fetch` cannot reach private ranges anyway.
 *
 * @module
 */

const PRIVATE_V4 = [
  [0x00000000, 8], // 0.0.0.0/8
  [0x0a000000, 8], // 10/8
  [0x64400000, 10], // 100.64/10 (carrier-grade NAT)
  [0x7f000000, 8], // 127/8
  [0xa9fe0000, 16], // 169.254/16
  [0xac100000, 12], // 172.16/12
  [0xc0a80000, 16], // 192.168/16
] as const;

function ipv4(host: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255)) return null;
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

/**
 * Why `url` may not be used as a callback target, or null when it may.
 *
 * @example
 * ```ts
 * callbackUrlProblem("http://127.0.0.1:9/cb", false); // "host 127.0.0.1 is loopback or private…"
 * callbackUrlProblem("http://127.0.0.1:9/cb", true); // null (local dev)
 * ```
 */
export function callbackUrlProblem(url: string, allowPrivate: boolean): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "is not a URL";
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return "must be http or https";
  if (allowPrivate) return null;
  const host = parsed.hostname.toLowerCase().replace(/^\[|\]$/g, "");
  const refuse = `host ${host} is loopback, private or internal; callbacks there are allowed only under polar dev or with POLAR_ALLOW_PRIVATE_CALLBACKS=1`;
  if (
    host === "localhost" ||
    host.endsWith(".localhost") ||
    host.endsWith(".local") ||
    host.endsWith(".internal")
  )
    return refuse;
  const v4 = ipv4(host);
  if (v4 !== null) {
    for (const [base, bits] of PRIVATE_V4) {
      const mask = (~0 << (32 - bits)) >>> 0;
      if ((v4 & mask) >>> 0 === base) return refuse;
    }
    return null;
  }
  if (host.includes(":")) {
    if (host === "::" || host === "::1") return refuse;
    if (/^f[cd]/.test(host) || /^fe[89ab]/.test(host)) return refuse; // fc00::/7, fe80::/10
    const mapped = /^::ffff:(.+)$/.exec(host);
    if (mapped) return callbackUrlProblem(`http://${mapped[1]}/`, false) ? refuse : null;
  }
  return null;
}

/**
 * True when the Worker runs under `polar dev` (the `POLAR_DEV_MODE` variable is "1").
 *
 * @example
 * ```ts
 * callbackUrlProblem(url, isDevMode(env));
 * ```
 */
export function isDevMode(env: { POLAR_DEV_MODE?: string }): boolean {
  return env.POLAR_DEV_MODE === "1";
}

/**
 * True when callbacks to loopback/private hosts are allowed: under `polar dev`, or when the
 * operator set `POLAR_ALLOW_PRIVATE_CALLBACKS` to "1".
 *
 * @example
 * ```ts
 * callbackUrlProblem(url, privateCallbacksAllowed(env));
 * ```
 */
export function privateCallbacksAllowed(env: {
  POLAR_DEV_MODE?: string;
  POLAR_ALLOW_PRIVATE_CALLBACKS?: string;
}): boolean {
  return isDevMode(env) || env.POLAR_ALLOW_PRIVATE_CALLBACKS === "1";
}
