/**
 * What a route module describes its operations with: each `routes/*.ts` (and `metrics.ts`,
 * `openapi-state.ts`) exports a `describe…(api)` beside its handlers, and `openapi.ts` hands them
 * one {@link ApiDescription} in the document's order. The handlers stay plain Hono routes with
 * their own checks; these entries only describe them, from the same zod schemas (`protocol/`).
 *
 * @module
 */
import type { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import { ErrorBody } from "../protocol";

/** The HTTP methods the control plane serves. */
export type Method = "get" | "post" | "put" | "delete";

/** A JSON response of an operation, as {@link json} writes it. */
export interface JsonResponse {
  description: string;
  content: { "application/json": { schema: z.ZodType } };
}

/** What an operation reads besides its path: a JSON body, path parameters, query parameters. */
export interface OperationRequest {
  body?: z.ZodType;
  params?: z.ZodObject;
  query?: z.ZodObject;
}

/** The registry of an {@link OpenAPIHono} document, and one entry of it. */
type Registry = OpenAPIHono["openAPIRegistry"];
type RouteEntry = Parameters<Registry["registerPath"]>[0];

/**
 * A JSON response.
 *
 * @example
 * ```ts
 * api.path("get", "/v1/batches/{id}", "getBatch", "Batch status", { 200: json(BatchStatusBody, "Status") });
 * ```
 */
export function json(schema: z.ZodType, description: string): JsonResponse {
  return { description, content: { "application/json": { schema } } };
}

/**
 * The error answers every operation documents (the body is `protocol`'s `ErrorBody`); an
 * operation's own responses are added to them.
 *
 * @example
 * ```ts
 * api.register({ ..., responses: { 401: errors[401], 200: textResponse } });
 * ```
 */
export const errors = {
  400: json(ErrorBody, "Invalid input; the message names the field"),
  401: json(ErrorBody, "Missing or wrong bearer token"),
  403: json(ErrorBody, "Token of another role (e.g. the read-only viewer token on a write)"),
  404: json(ErrorBody, "Not found"),
};

/**
 * One string path parameter.
 *
 * @example
 * ```ts
 * api.path("delete", "/v1/admin/path_tokens/{name}", "revokePathTokens", "Revoke", responses, {
 *   params: idParam("name"),
 * });
 * ```
 */
export function idParam(name: string): z.ZodObject {
  return z.object({ [name]: z.string() });
}

/** Registers the operations of a document; see {@link apiDescription}. */
export interface ApiDescription {
  /**
   * A bearer-authenticated operation answering JSON, with {@link errors} and `responses`.
   * `operationId` is a required argument, not an option: generated clients name their methods
   * after it, so an operation without one would have no stable name.
   */
  path(
    method: Method,
    route: string,
    operationId: string,
    summary: string,
    responses: Record<number, JsonResponse>,
    request?: OperationRequest,
  ): void;
  /** An operation {@link ApiDescription.path} cannot shape (another content type, other errors). */
  register(entry: RouteEntry & { operationId: string }): void;
}

/**
 * The describer of `registry`'s document. Every operation passes one check: its `operationId` is
 * camelCase and not taken yet, since two methods of a generated client cannot share a name.
 *
 * @example
 * ```ts
 * const doc = new OpenAPIHono();
 * const api = apiDescription(doc.openAPIRegistry);
 * describeBatchRoutes(api);
 * ```
 */
export function apiDescription(registry: Registry): ApiDescription {
  const operationIds = new Set<string>();
  const register = (entry: RouteEntry & { operationId: string }) => {
    const { operationId } = entry;
    if (!/^[a-z][A-Za-z0-9]*$/.test(operationId) || operationIds.has(operationId))
      throw new Error(
        `operationId '${operationId}' of ${entry.method} ${entry.path} is not a fresh camelCase name`,
      );
    operationIds.add(operationId);
    registry.registerPath(entry);
  };
  const path: ApiDescription["path"] = (method, route, operationId, summary, responses, request = {}) =>
    register({
      method,
      path: route,
      operationId,
      summary,
      security: [{ bearer: [] }],
      request: {
        ...(request.body ? { body: { content: { "application/json": { schema: request.body } } } } : {}),
        ...(request.params ? { params: request.params } : {}),
        ...(request.query ? { query: request.query } : {}),
      },
      responses: { ...errors, ...responses },
    });
  return { path, register };
}
