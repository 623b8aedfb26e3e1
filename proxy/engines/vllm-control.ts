/**
 * The engine side of a weight-update pause in `abort` mode for vLLM. vLLM's chat API has no abort
 * by id outside its dev routes, so the proxy always aborts a call by cutting its request (vLLM
 * aborts a request whose client went away). Where the server has vLLM's pause route — `POST
 * /pause` of the RLHF dev router, served with `VLLM_SERVER_DEV_MODE=1` since PR #28037 (2025-11);
 * its default `mode=abort` aborts every request in flight and holds new ones until `POST /resume`
 * (`vllm/entrypoints/serve/dev/rlhf/api_router.py`) — the proxy also pauses every replica, so no
 * generation runs on the old weights during the update, and resumes them with the fence. A server
 * without the route (404: an older vLLM, or dev mode off) is told once in the log and left alone.
 *
 * @module
 */
import type { Logger } from "../../protocol";
import { postJson } from "../upstream";

/**
 * How long one replica may take to acknowledge `/pause` or `/resume` (ms).
 *
 * @example
 * ```ts
 * postJson(`${url}/pause?mode=abort`, {}, {}, { timeoutMs: VLLM_PAUSE_TIMEOUT_MS });
 * ```
 */
export const VLLM_PAUSE_TIMEOUT_MS = 5_000;

/**
 * Pauses (in vLLM's `abort` mode) and resumes the vLLM replicas that have the pause route.
 *
 * @example
 * ```ts
 * const enginePause = new VllmEnginePause(logger);
 * await enginePause.pause(["http://gpu-0:8000"]); // POST /pause?mode=abort
 * await enginePause.resume(); // POST /resume on the replicas that paused
 * ```
 */
export class VllmEnginePause {
  /** Replicas paused by the proxy, to resume. */
  private readonly paused = new Set<string>();
  /** Replicas already reported as lacking the route. */
  private readonly reported = new Set<string>();
  private pending: Promise<void> = Promise.resolve();

  constructor(private readonly logger?: Logger) {}

  /** `POST /pause?mode=abort` on every replica (best effort); resolves once each answered. */
  pause(urls: readonly string[]): Promise<void> {
    const run = async () => {
      await Promise.all(
        urls.map(async (url) => {
          try {
            const res = await postJson(
              `${url}/pause?mode=abort`,
              {},
              { "content-type": "application/json" },
              { timeoutMs: VLLM_PAUSE_TIMEOUT_MS },
            );
            if (res.status >= 200 && res.status < 300) {
              this.paused.add(url);
            } else if (!this.reported.has(url)) {
              this.reported.add(url);
              this.logger?.warn(
                "vLLM replica has no engine-side pause (vLLM's /pause needs VLLM_SERVER_DEV_MODE=1); calls in flight are aborted by cutting them",
                { replica: url, status: res.status },
              );
            }
          } catch (error) {
            this.logger?.warn("vLLM /pause failed; calls in flight are aborted by cutting them", {
              replica: url,
              error: error instanceof Error ? error.message : String(error),
            });
          }
        }),
      );
    };
    this.pending = this.pending.then(run);
    return this.pending;
  }

  /** `POST /resume` on the replicas this proxy paused, after any pause still under way. */
  resume(): Promise<void> {
    const run = async () => {
      const urls = [...this.paused];
      this.paused.clear();
      await Promise.all(
        urls.map(async (url) => {
          try {
            const res = await postJson(
              `${url}/resume`,
              {},
              { "content-type": "application/json" },
              { timeoutMs: VLLM_PAUSE_TIMEOUT_MS },
            );
            if (res.status < 200 || res.status >= 300)
              this.logger?.error("vLLM /resume refused: the replica stays paused", {
                replica: url,
                status: res.status,
              });
          } catch (error) {
            this.logger?.error("vLLM /resume failed: the replica may stay paused", {
              replica: url,
              error: error instanceof Error ? error.message : String(error),
            });
          }
        }),
      );
    };
    this.pending = this.pending.then(run);
    return this.pending;
  }
}
