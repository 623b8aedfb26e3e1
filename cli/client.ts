/**
 * A small typed client for the control plane's trainer API, used by the CLI, the demo and the
 * end-to-end tests. Every response body is validated with the protocol's schemas, so a contract
 * drift between Worker and client fails loudly here instead of deep in a trainer.
 *
 * @module
 */
import {
  type BatchCreated,
  BatchCreated as BatchCreatedSchema,
  type BatchRequestInput,
  type BatchStatusBody,
  BatchStatusBody as BatchStatusSchema,
  ErrorBody,
  type ResultsPage,
  ResultsPage as ResultsPageSchema,
  SessionLogs,
  SessionTokens,
} from "../protocol";

/** A non-2xx answer from the control plane, with its `{error:{code,message}}` body. */
export class ControlPlaneError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = "ControlPlaneError";
  }
}

/**
 * Trainer-side client.
 *
 * @example
 * ```ts
 * const cp = new ControlPlaneClient("http://127.0.0.1:8787", process.env.POLAR_TRAINER_TOKEN!);
 * const { batch_id } = await cp.submit({ tasks: [task] });
 * for await (const r of cp.streamResults(batch_id)) console.log(r.result.status);
 * ```
 */
export class ControlPlaneClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const res = await fetch(new URL(path, this.baseUrl), {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      throw new ControlPlaneError(res.status, "bad_response", `non-JSON body: ${text.slice(0, 200)}`);
    }
    if (!res.ok) {
      const parsed = ErrorBody.safeParse(json);
      if (parsed.success) {
        const e = parsed.data.error;
        throw new ControlPlaneError(res.status, e.code, e.message, e.details);
      }
      throw new ControlPlaneError(res.status, "http_error", text.slice(0, 500));
    }
    return json;
  }

  /** `POST /v1/batches`. */
  async submit(batch: BatchRequestInput): Promise<BatchCreated> {
    return BatchCreatedSchema.parse(await this.request("POST", "/v1/batches", batch));
  }

  /** `GET /v1/batches/:id`. */
  async status(batchId: string): Promise<BatchStatusBody> {
    return BatchStatusSchema.parse(await this.request("GET", `/v1/batches/${encodeURIComponent(batchId)}`));
  }

  /** `GET /v1/batches/:id/results?after=SEQ`. */
  async results(batchId: string, after = 0): Promise<ResultsPage> {
    const path = `/v1/batches/${encodeURIComponent(batchId)}/results?after=${after}`;
    return ResultsPageSchema.parse(await this.request("GET", path));
  }

  /** `GET /v1/sessions/:id/logs`. */
  async sessionLogs(sessionId: string): Promise<SessionLogs> {
    return SessionLogs.parse(await this.request("GET", `/v1/sessions/${encodeURIComponent(sessionId)}/logs`));
  }

  /** `GET /v1/sessions/:id/tokens`. */
  async sessionTokens(sessionId: string): Promise<SessionTokens> {
    return SessionTokens.parse(
      await this.request("GET", `/v1/sessions/${encodeURIComponent(sessionId)}/tokens`),
    );
  }

  /**
   * Yields every result of a batch in sequence order, polling until the batch is done or
   * `timeoutMs` passes (then throws).
   */
  async *streamResults(
    batchId: string,
    opts: { pollMs?: number; timeoutMs?: number } = {},
  ): AsyncGenerator<ResultsPage["results"][number]> {
    const deadline = Date.now() + (opts.timeoutMs ?? 30 * 60_000);
    let after = 0;
    for (;;) {
      const page = await this.results(batchId, after);
      for (const r of page.results) yield r;
      after = page.next;
      if (page.done && page.results.length === 0) return;
      if (page.results.length > 0) continue;
      if (Date.now() > deadline) throw new Error(`batch ${batchId} not done after ${opts.timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
    }
  }
}
