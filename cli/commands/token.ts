/**
 * `polar token create --role trainer|gateway|admin [--node-id ID] [--register --url URL]`: prints a
 * fresh token and what to set.
 *
 * - trainer / admin / shared gateway token: a random token to store as a Worker secret
 *   (`wrangler secret put POLAR_<ROLE>_TOKEN`); the platform keeps secrets encrypted.
 * - per-gateway token (`--role gateway --node-id ID`): `gw_<ID>.<secret>`. The control plane keeps
 *   only its SHA-256, registered through `POST /v1/admin/gateway_tokens` (admin token). With
 *   `--register` this command registers it itself (needs `POLAR_ADMIN_TOKEN`); otherwise it prints
 *   the request to run.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import { Identifier } from "../../protocol";
import { UsageError } from "../usage-error";

export interface TokenCreateOptions {
  role: string;
  nodeId?: string;
  register?: boolean;
  url?: string;
}

/** A created token and how to install it. */
export interface CreatedToken {
  token: string;
  sha256: string;
  role: "trainer" | "gateway" | "admin";
  nodeId: string | null;
  /** Shell lines that install it. */
  steps: string[];
}

const ROLES = ["trainer", "gateway", "admin"] as const;

/**
 * Makes a token for `role` (and `nodeId` for a per-gateway token) without side effects.
 *
 * @example
 * ```ts
 * const t = createToken("gateway", "gpu-01"); // t.token = "gw_gpu-01.…", t.sha256 = "…"
 * ```
 */
export function createToken(role: string, nodeId?: string): CreatedToken {
  if (!(ROLES as readonly string[]).includes(role)) {
    throw new UsageError(`--role: must be one of ${ROLES.join(", ")}, got '${role}'`);
  }
  const r = role as CreatedToken["role"];
  if (nodeId !== undefined && r !== "gateway") throw new UsageError("--node-id: only with --role gateway");
  const secret = randomBytes(32).toString("base64url");
  if (nodeId !== undefined) {
    const parsed = Identifier.safeParse(nodeId);
    if (!parsed.success) throw new UsageError(`--node-id: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    const token = `gw_${nodeId}.${secret}`;
    const sha256 = createHash("sha256").update(token).digest("hex");
    return {
      token,
      sha256,
      role: r,
      nodeId,
      steps: [
        `curl -X POST "$POLAR_URL/v1/admin/gateway_tokens" -H "Authorization: Bearer $POLAR_ADMIN_TOKEN" \\`,
        `  -H "Content-Type: application/json" -d '{"node_id":"${nodeId}","sha256":"${sha256}"}'`,
        `# on the gateway host: export POLAR_GATEWAY_TOKEN='${token}'`,
      ],
    };
  }
  const token = `polar_${r}_${secret}`;
  const secretName = `POLAR_${r.toUpperCase()}_TOKEN`;
  return {
    token,
    sha256: createHash("sha256").update(token).digest("hex"),
    role: r,
    nodeId: null,
    steps: [
      `printf '%s' '${token}' | npx wrangler secret put ${secretName}`,
      `# clients: export ${secretName}='${token}'`,
    ],
  };
}

/** Prints the token and its installation steps; with `--register`, registers a gateway token. */
export async function runTokenCreate(opts: TokenCreateOptions): Promise<void> {
  const created = createToken(opts.role, opts.nodeId);
  if (opts.register) {
    if (!created.nodeId)
      throw new UsageError("--register: only for per-gateway tokens (--role gateway --node-id ID)");
    const url = opts.url ?? process.env.POLAR_URL;
    const admin = process.env.POLAR_ADMIN_TOKEN;
    if (!url) throw new UsageError("--register: set --url or POLAR_URL (the control plane)");
    if (!admin)
      throw new UsageError("--register: POLAR_ADMIN_TOKEN is not set (registering needs the admin token)");
    const res = await fetch(new URL("/v1/admin/gateway_tokens", url), {
      method: "POST",
      headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
      body: JSON.stringify({ node_id: created.nodeId, sha256: created.sha256 }),
    });
    if (!res.ok)
      throw new UsageError(`--register: the control plane answered ${res.status}: ${await res.text()}`);
    console.log(
      `registered a gateway token for node '${created.nodeId}' (the control plane stores only its SHA-256)`,
    );
    console.log(created.token);
    console.log(`# on the gateway host: export POLAR_GATEWAY_TOKEN='${created.token}'`);
    return;
  }
  console.log(created.token);
  console.log("");
  console.log(
    created.nodeId
      ? "Register it (the control plane stores only its SHA-256):"
      : "Set it as a Worker secret:",
  );
  for (const line of created.steps) console.log(`  ${line}`);
}
