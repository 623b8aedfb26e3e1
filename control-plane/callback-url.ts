/**
 * Policy for trainer callback URLs. By default the control plane refuses loopback, private,
 * link-local and internal host names, so a trainer cannot make it call into the network it runs in
 * (SSRF). They are allowed under `polar dev` (`POLAR_DEV_MODE=1`) and where the operator allows
 * them (`POLAR_ALLOW_PRIVATE_CALLBACKS=1`: a control plane that runs inside the trainers' network,
 * e.g. `wrangler dev` or workerd next to the cluster, where upstream's bridge listens on the
 * trainer host). Only literal addresses and well-known names can be checked: Workers have no DNS
 * lookup API (a public name that resolves to a private address is not caught here), and a
 * deployed Worker's own `fetch` cannot reach private ranges anyway. Redirects are never followed
 * (`batch/callbacks.ts`), so a public host cannot bounce a callback to a private one.
 *
 * @module
 */
import * as ipaddr from "ipaddr.js";

/**
 * Host names that name the local machine or a private network by convention: `localhost`
 * (RFC 6761), mDNS `.local` (RFC 6762), `.internal` (cloud metadata, e.g.
 * `metadata.google.internal`), `.home.arpa` (RFC 8375) and `.localdomain`.
 */
const PRIVATE_SUFFIXES = [".localhost", ".local", ".internal", ".home.arpa", ".localdomain"];

/** The local-use NAT64 prefix of RFC 8215. */
const LOCAL_NAT64 = ipaddr.IPv6.parse("64:ff9b:1::");

/**
 * Why the literal address `host` may not be called, or null for a public unicast one. An IPv6
 * address that embeds an IPv4 one (IPv4-mapped `::ffff:a.b.c.d`, SIIT `::ffff:0:a.b.c.d`, NAT64
 * `64:ff9b::/96`, the deprecated IPv4-compatible `::a.b.c.d`) is judged by the IPv4 address it
 * reaches; local-use NAT64 (`64:ff9b:1::/48`) is refused outright. 6to4 and Teredo addresses, which tunnel to an IPv4 host, are refused outright, as is
 * every range ipaddr.js does not class as `unicast` (loopback, private, link-local, unique-local,
 * carrier-grade NAT, multicast, benchmarking, documentation, reserved).
 */
function addressProblem(host: string): "private" | "tunnel" | null {
  if (!ipaddr.isValid(host)) return null;
  let addr = ipaddr.parse(host);
  if (addr.kind() === "ipv6") {
    const v6 = addr as ipaddr.IPv6;
    const range = v6.range();
    if (range === "6to4" || range === "teredo") return "tunnel";
    // Local-use NAT64 (RFC 8215, 64:ff9b:1::/48) translates into a network's own IPv4 space, with
    // the IPv4 address at a position the prefix length chooses: never a public destination.
    if (v6.match(LOCAL_NAT64, 48)) return "private";
    const compat =
      v6.parts.slice(0, 6).every((p) => p === 0) && range !== "unspecified" && range !== "loopback";
    if (range === "ipv4Mapped" || range === "rfc6145" || range === "rfc6052" || compat) {
      const [hi, lo] = [v6.parts[6]!, v6.parts[7]!];
      addr = new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
    }
  }
  return addr.range() === "unicast" ? null : "private";
}

/**
 * Why `url` may not be used as a callback target, or null when it may. The host is read as the
 * WHATWG URL parser leaves it, which already turns every IPv4 spelling (`2130706433`, `0x7f.1`,
 * `017700000001`, `127.1`) into dotted decimal and compresses IPv6, so those forms cannot slip
 * past; trailing dots of a name (`localhost.`) are dropped before it is judged.
 *
 * @example
 * ```ts
 * callbackUrlProblem("http://127.0.0.1:9/cb", false); // "host 127.0.0.1 is loopback or private…"
 * callbackUrlProblem("http://[::ffff:10.0.0.1]/cb", false); // refused: it reaches 10.0.0.1
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
  const host = parsed.hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, "")
    .replace(/\.+$/, "");
  const refuse = `host ${host} is loopback, private or internal; callbacks there are allowed only under polar dev or with POLAR_ALLOW_PRIVATE_CALLBACKS=1`;
  if (host === "" || host === "localhost" || PRIVATE_SUFFIXES.some((s) => host.endsWith(s))) return refuse;
  const problem = addressProblem(host);
  if (problem === "tunnel")
    return `host ${host} is a 6to4 or Teredo address (it tunnels to an IPv4 host that cannot be checked); use the host's own address`;
  return problem ? refuse : null;
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
