/**
 * `polar token create --role trainer|gateway|admin [--node-id ID] [--path --name NAME [--queue Q]]
 * [--register --url URL]`: prints a fresh token and what to set.
 *
 * - trainer / admin / shared gateway token: a random token to store as a Worker secret
 *   (`wrangler secret put POLAR_<ROLE>_TOKEN`); the platform keeps secrets encrypted.
 * - per-gateway token (`--role gateway --node-id ID`): `gw_<ID>.<secret>`. The control plane keeps
 *   only its SHA-256, registered through `POST /v1/admin/gateway_tokens` (admin token).
 * - path credential (`--role trainer --path --name NAME`): `pt_<NAME>.<secret>`, for the base URL
 *   `<control plane>/u/<credential>` an unmodified upstream bridge is pointed at
 *   (docs/upstream-compat.md). Scoped to the upstream routes and one queue; the control plane
 *   keeps only its SHA-256, registered through `POST /v1/admin/path_tokens`, revoked by name
 *   through `DELETE /v1/admin/path_tokens/NAME`.
 *
 * With `--register` this command registers the hash itself (needs `POLAR_ADMIN_TOKEN`); otherwise
 * it prints the request to run.
 *
 * @module
 */
import { createHash, randomBytes } from "node:crypto";
import { withDeadline } from "../../clients/typescript/src/index";
import { Identifier } from "../../protocol";
import { UsageError } from "../usage-error";

export interface TokenCreateOptions {
  role: string;
  nodeId?: string;
  path?: boolean;
  name?: string;
  queue?: string;
  register?: boolean;
  url?: string;
}

/** A created token and how to install it. */
export interface CreatedToken {
  token: string;
  sha256: string;
  role: "trainer" | "gateway" | "admin";
  nodeId: string | null;
  /** A path credential's name and queue (null for other tokens). */
  path: { name: string; queue: string } | null;
  /** Shell lines that install it. */
  steps: string[];
}

const ROLES = ["trainer", "gateway", "admin"] as const;

function identifier(flag: string, value: string): string {
  const parsed = Identifier.safeParse(value);
  if (!parsed.success) throw new UsageError(`${flag}: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data;
}

const sha256Of = (token: string) => createHash("sha256").update(token).digest("hex");

/**
 * Makes a token for `role` (and `nodeId` for a per-gateway token, `path` for a path credential)
 * without side effects.
 *
 * @example
 * ```ts
 * const t = createToken("gateway", "gpu-01"); // t.token = "gw_gpu-01.…", t.sha256 = "…"
 * const p = createToken("trainer", undefined, { name: "slime-run-1" }); // p.token = "pt_slime-run-1.…"
 * ```
 */
export function createToken(
  role: string,
  nodeId?: string,
  path?: { name?: string; queue?: string },
): CreatedToken {
  if (!(ROLES as readonly string[]).includes(role)) {
    throw new UsageError(`--role: must be one of ${ROLES.join(", ")}, got '${role}'`);
  }
  const r = role as CreatedToken["role"];
  if (nodeId !== undefined && r !== "gateway") throw new UsageError("--node-id: only with --role gateway");
  const secret = randomBytes(32).toString("base64url");
  if (path) {
    if (r !== "trainer") throw new UsageError("--path: only with --role trainer");
    if (path.name === undefined)
      throw new UsageError("--name: required with --path (it revokes the credential)");
    const name = identifier("--name", path.name);
    const queue = identifier("--queue", path.queue ?? "default");
    const token = `pt_${name}.${secret}`;
    const sha256 = sha256Of(token);
    return {
      token,
      sha256,
      role: r,
      nodeId: null,
      path: { name, queue },
      steps: [
        `curl -X POST "$POLAR_URL/v1/admin/path_tokens" -H "Authorization: Bearer $POLAR_ADMIN_TOKEN" \\`,
        `  -H "Content-Type: application/json" -d '{"name":"${name}","sha256":"${sha256}","queue":"${queue}"}'`,
        `# the upstream bridge: polar_rollout_url: "$POLAR_URL/u/${token}"`,
        `# revoke: curl -X DELETE "$POLAR_URL/v1/admin/path_tokens/${name}" -H "Authorization: Bearer $POLAR_ADMIN_TOKEN"`,
      ],
    };
  }
  if (nodeId !== undefined) {
    identifier("--node-id", nodeId);
    const token = `gw_${nodeId}.${secret}`;
    const sha256 = sha256Of(token);
    return {
      token,
      sha256,
      role: r,
      nodeId,
      path: null,
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
    sha256: sha256Of(token),
    role: r,
    nodeId: null,
    path: null,
    steps: [
      `printf '%s' '${token}' | npx wrangler secret put ${secretName}`,
      `# clients: export ${secretName}='${token}'`,
    ],
  };
}

/** POSTs the hash of a per-gateway token or path credential to the admin route. */
async function register(created: CreatedToken, url: string, admin: string): Promise<void> {
  const [route, body] = created.path
    ? [
        "/v1/admin/path_tokens",
        { name: created.path.name, sha256: created.sha256, queue: created.path.queue },
      ]
    : ["/v1/admin/gateway_tokens", { node_id: created.nodeId, sha256: created.sha256 }];
  // With a deadline: the global fetch alone would wait 300 s on a control plane that never answers.
  const res = await withDeadline(fetch)(new URL(route, url), {
    method: "POST",
    headers: { Authorization: `Bearer ${admin}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok)
    throw new UsageError(`--register: the control plane answered ${res.status}: ${await res.text()}`);
}

/** Prints the token and its installation steps; with `--register`, registers its hash. */
export async function runTokenCreate(opts: TokenCreateOptions): Promise<void> {
  const path = opts.path ? { name: opts.name, queue: opts.queue } : undefined;
  if (!opts.path && (opts.name !== undefined || opts.queue !== undefined))
    throw new UsageError(`${opts.name !== undefined ? "--name" : "--queue"}: only with --path`);
  const created = createToken(opts.role, opts.nodeId, path);
  if (opts.register) {
    if (!created.nodeId && !created.path)
      throw new UsageError(
        "--register: only for per-gateway tokens (--role gateway --node-id ID) and path credentials (--path)",
      );
    const url = opts.url ?? process.env.POLAR_URL;
    const admin = process.env.POLAR_ADMIN_TOKEN;
    if (!url) throw new UsageError("--register: set --url or POLAR_URL (the control plane)");
    if (!admin)
      throw new UsageError("--register: POLAR_ADMIN_TOKEN is not set (registering needs the admin token)");
    await register(created, url, admin);
    if (created.path) {
      console.log(
        `registered path credential '${created.path.name}' for queue '${created.path.queue}' (the control plane stores only its SHA-256)`,
      );
      console.log(`${url.replace(/\/+$/, "")}/u/${created.token}`);
      console.log(
        `# the upstream bridge: polar_rollout_url: <the URL above>; revoke: DELETE /v1/admin/path_tokens/${created.path.name}`,
      );
      return;
    }
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
    created.nodeId || created.path
      ? "Register it (the control plane stores only its SHA-256):"
      : "Set it as a Worker secret:",
  );
  for (const line of created.steps) console.log(`  ${line}`);
}
