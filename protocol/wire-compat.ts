/**
 * Which Polar releases talk to each other over the gateway wire, and the words of a refusal when
 * two cannot. Both ends use it: the control plane to refuse a `hello` it cannot speak (naming the
 * gateway's wire and Polar versions and its own), the gateway to explain a close 4400 with its own
 * versions beside the control plane's, and what to upgrade first.
 *
 * Policy (docs/control-plane.md, "Compatibility and upgrades"): a control plane speaks its wire
 * version and the one before it, so a fleet upgrades its control plane first, then its gateways.
 *
 * @module
 */
// Read at bundle time (wrangler's esbuild for the Worker, the gateway package's build): each side
// reports the version of the repository it was built from, not a number kept in sync by hand.
import { version } from "../package.json";
import { SUPPORTED_WIRE_VERSIONS } from "./wire";

/**
 * The Polar release this code was built from (the repository's package.json `version`).
 *
 * @example
 * ```ts
 * POLAR_VERSION; // "0.1.0"
 * ```
 */
export const POLAR_VERSION: string = version;

/** One side of the wire: its Polar release and the wire versions it speaks. */
export interface WireSide {
  polar: string;
  wire: readonly number[];
}

/** This build as a control plane: every version it still speaks. */
const CONTROL_PLANE: WireSide = { polar: POLAR_VERSION, wire: SUPPORTED_WIRE_VERSIONS };

/**
 * `[1, 2]` → `"v1 and v2"`, `[1, 2, 3]` → `"v1, v2 and v3"`.
 *
 * @example
 * ```ts
 * wireVersionList([1, 2]); // "v1 and v2"
 * ```
 */
export function wireVersionList(versions: readonly number[]): string {
  const named = versions.map((n) => `v${n}`);
  return named.length < 2
    ? (named[0] ?? "no version")
    : `${named.slice(0, -1).join(", ")} and ${named.at(-1)}`;
}

/** A field of an unvalidated hello, shown safely: a short string, else null. */
function shown(value: unknown): string | null {
  if (typeof value !== "string" || value === "") return null;
  return value.length > 64 ? `${value.slice(0, 64)}…` : value;
}

/**
 * The message of `unsupported_version`: the control plane refusing a `hello` whose `v` it does
 * not speak. It names both sides (node, wire version and Polar release of the gateway; Polar
 * release and wire versions of the control plane) and which side to upgrade. `hello` is the raw
 * frame: it failed the schema, so every field is checked here.
 *
 * @example
 * ```ts
 * versionRefusal({ v: 0, node_id: "gpu-0", agent_version: "0.0.9" });
 * // "gateway 'gpu-0' speaks wire v0 (polar 0.0.9); this control plane (polar 0.1.0) speaks v1, v2 and v3: upgrade the gateway to polar 0.1.0"
 * ```
 */
export function versionRefusal(hello: Record<string, unknown>, cp: WireSide = CONTROL_PLANE): string {
  const node = shown(hello.node_id);
  const agent = shown(hello.agent_version);
  const v = hello.v;
  const wire =
    typeof v === "number" && Number.isInteger(v) ? `v${v}` : `version ${JSON.stringify(v) ?? "(none)"}`;
  const gateway = `gateway ${node ? `'${node}'` : "(no node_id)"} speaks wire ${wire} (polar ${agent ?? "?"})`;
  const ours = `this control plane (polar ${cp.polar}) speaks ${wireVersionList(cp.wire)}`;
  const newest = Math.max(...cp.wire);
  const fix =
    typeof v === "number" && v > newest
      ? `upgrade the control plane to a release that speaks ${wire} (a fleet upgrades its control plane first, then its gateways), or run this gateway at polar ${cp.polar}`
      : `upgrade the gateway to polar ${cp.polar}`;
  return `${gateway}; ${ours}: ${fix}`;
}

/** What a gateway refused with close 4400 tells its operator. */
export interface VersionRefusalReport {
  /** Both sides' versions, with the control plane's own words. */
  reason: string;
  /** Which side to upgrade. */
  fix: string;
}

/**
 * Explains a close 4400 from the gateway's side. `said` is the control plane's `error` message
 * (`code: message`), or null when none arrived. Control planes of every release so far say
 * "this control plane … speaks v1[ and v2]": from that the gateway tells whether the control plane
 * is older (upgrade it first) or newer (upgrade the gateway); otherwise it names its own versions
 * and the upgrade order.
 *
 * @example
 * ```ts
 * describeVersionRefusal("unsupported_version: protocol version 2 is not supported; this control plane speaks v1", { polar: "0.2.0", wire: [2] }).fix;
 * // "upgrade the control plane first, to polar 0.2.0 or later (it speaks v2) …"
 * ```
 */
export function describeVersionRefusal(said: string | null, gateway: WireSide): VersionRefusalReport {
  const ownWire = Math.max(...gateway.wire);
  const mine = `this gateway (polar ${gateway.polar}) speaks wire v${ownWire}`;
  const reason = `${mine}; the control plane said: ${said ?? "(no error message, only the close)"}`;
  const listed = said?.match(/speaks (v\d+(?:(?:, | and )v\d+)*)/)?.[1];
  const theirs = listed ? [...listed.matchAll(/v(\d+)/g)].map((m) => Number(m[1])) : [];
  const theirPolar = said?.match(/this control plane \(polar ([^)\s]+)\)/)?.[1];
  if (theirs.length > 0 && Math.max(...theirs) < ownWire)
    return {
      reason,
      fix: `upgrade the control plane first, to polar ${gateway.polar} or later (it speaks v${ownWire}); until then run gateways of the control plane's release (a fleet upgrades its control plane first, then its gateways)`,
    };
  if (theirs.length > 0 && Math.min(...theirs) > ownWire)
    return {
      reason,
      fix: `upgrade this gateway to ${theirPolar ? `polar ${theirPolar}` : "the control plane's release"} (it speaks ${wireVersionList(theirs)})`,
    };
  return {
    reason,
    fix: "run a gateway and a control plane that share a wire version (a control plane speaks its own and the previous one): upgrade the control plane first, then the gateways",
  };
}
