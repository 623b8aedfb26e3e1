/**
 * `polar dashboard`: prints the dashboard's URL for a local (`polar dev`) or deployed control
 * plane, signed in through a `#token=` fragment (a fragment is never sent to a server, so the
 * token reaches no log), and opens it in a browser where this machine has one.
 *
 * The token is the first of `POLAR_VIEWER_TOKEN`, `POLAR_TRAINER_TOKEN`, `POLAR_ADMIN_TOKEN` that
 * is set; for a loopback control plane with none set, `polar dev`'s documented trainer token.
 *
 * @module
 */
import { spawn } from "node:child_process";
import { DEV_TOKENS } from "../dev-tokens";
import { UsageError } from "../usage-error";

export interface DashboardOptions {
  controlPlane?: string;
  json?: boolean;
  /** Commander's `--no-open` sets this to false. */
  open?: boolean;
}

/** What `polar dashboard` found. */
export interface DashboardLink {
  /** The URL to open, with `#token=` when a token is known. */
  url: string;
  /** The same URL without the token (safe to show or log). */
  base: string;
  /** Which variable the token came from, or `dev` / null. */
  token_from: string | null;
  /** Whether `GET /health` answered. */
  reachable: boolean;
}

const TOKEN_VARS = ["POLAR_VIEWER_TOKEN", "POLAR_TRAINER_TOKEN", "POLAR_ADMIN_TOKEN"] as const;

/** A loopback host: a local `polar dev`. */
function isLoopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || /^127\./.test(host);
}

/**
 * The dashboard URL of a control plane, with the token from `env`.
 *
 * @example
 * ```ts
 * dashboardLink("http://127.0.0.1:8787", { POLAR_VIEWER_TOKEN: "v" });
 * // { url: "http://127.0.0.1:8787/#token=v", base: "http://127.0.0.1:8787/", token_from: "POLAR_VIEWER_TOKEN" }
 * ```
 */
export function dashboardLink(
  controlPlane: string,
  env: NodeJS.ProcessEnv,
): Omit<DashboardLink, "reachable"> {
  let u: URL;
  try {
    u = new URL(controlPlane);
  } catch {
    throw new UsageError(`--control-plane: not a URL: ${controlPlane}`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:")
    throw new UsageError(`--control-plane: must be http:// or https://, got ${u.protocol}`);
  u.hash = "";
  u.search = "";
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  const base = u.toString();
  const fromVar = TOKEN_VARS.find((v) => env[v]);
  const token = fromVar ? env[fromVar]! : isLoopback(u.hostname) ? DEV_TOKENS.trainer : null;
  return {
    url: token ? `${base}#token=${encodeURIComponent(token)}` : base,
    base,
    token_from: fromVar ?? (token ? "dev" : null),
  };
}

/** Whether the control plane answers `/health` within 2 s. */
async function reachable(base: string): Promise<boolean> {
  try {
    const res = await fetch(new URL("health", base), { signal: AbortSignal.timeout(2000) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * Opens `url` with the desktop's opener (`open` on macOS, `xdg-open` elsewhere) when there is a
 * desktop; never fails (a missing opener or display just means the URL is only printed).
 *
 * @example
 * ```ts
 * openInBrowser("http://127.0.0.1:8787/#token=…"); // true when an opener was started
 * ```
 */
export function openInBrowser(url: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const mac = process.platform === "darwin";
  if (!mac && !env.DISPLAY && !env.WAYLAND_DISPLAY) return false;
  try {
    const child = spawn(mac ? "open" : "xdg-open", [url], { stdio: "ignore", detached: true });
    child.on("error", () => {});
    child.unref();
    return true;
  } catch {
    return false;
  }
}

/**
 * Runs `polar dashboard`.
 *
 * @example
 * ```ts
 * await runDashboard({ controlPlane: "http://127.0.0.1:8787", open: false });
 * ```
 */
export async function runDashboard(
  opts: DashboardOptions,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const link = dashboardLink(opts.controlPlane ?? env.POLAR_URL ?? "http://127.0.0.1:8787", env);
  const result: DashboardLink = { ...link, reachable: await reachable(link.base) };
  if (opts.json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(result.url);
    if (!result.reachable)
      console.error(`polar: nothing answers at ${result.base} yet (start it with \`polar dev\`)`);
    if (result.token_from === null)
      console.error(
        "polar: no token in POLAR_VIEWER_TOKEN / POLAR_TRAINER_TOKEN: the dashboard will ask for one",
      );
  }
  if (opts.open !== false) openInBrowser(result.url, env);
}
