/**
 * Parsing gateway frames and building control-plane frames. Pure functions: the QueueDO decides
 * what to do with the outcome.
 *
 * @module
 */
import {
  CLOSE_UNSUPPORTED_VERSION,
  type ControlMessage,
  describeIssues,
  fieldIssues,
  GatewayMessage,
  LIMITS,
  SUPPORTED_WIRE_VERSIONS,
  tooDeep,
  tooDeepMessage,
  versionRefusal,
  WIRE_VERSION,
} from "../../protocol";

/** A refused frame: the wire `error` code and message, and whether the socket must be closed. */
export interface FrameRejection {
  ok: false;
  code: "too_large" | "invalid_json" | "invalid_message" | "unsupported_version";
  message: string;
  /** Close code to use, when the connection cannot continue. */
  close?: number;
}

/** Outcome of parsing one frame. */
export type ParsedFrame = { ok: true; message: GatewayMessage } | FrameRejection;

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/** UTF-8 size of a frame, computed only when the cheap bound is not enough. */
function frameBytes(frame: string | ArrayBuffer): number {
  if (typeof frame !== "string") return frame.byteLength;
  if (frame.length * 3 <= LIMITS.maxWireMessageBytes) return frame.length;
  return encoder.encode(frame).byteLength;
}

/**
 * Parses a gateway frame: size limit, JSON, nesting depth (`LIMITS.maxJsonDepth`), protocol version (a `hello` with another `v` must
 * close the socket; its message names both sides' versions, `versionRefusal`), then the `GatewayMessage` schema with every offending field named.
 *
 * @example
 * ```ts
 * const parsed = parseGatewayFrame('{"v":1,"type":"credit","grant":2}');
 * if (parsed.ok) console.log(parsed.message.type); // "credit"
 * ```
 */
export function parseGatewayFrame(frame: string | ArrayBuffer): ParsedFrame {
  const bytes = frameBytes(frame);
  if (bytes > LIMITS.maxWireMessageBytes) {
    return {
      ok: false,
      code: "too_large",
      message: `message is ${bytes} bytes; the limit is ${LIMITS.maxWireMessageBytes}`,
    };
  }
  const text = typeof frame === "string" ? frame : decoder.decode(frame);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, code: "invalid_json", message: `message is not JSON: ${(error as Error).message}` };
  }
  // Deeper nesting would fail as the message is cloned to the ledger or stored (JSON.stringify).
  const deep = tooDeep(value);
  if (deep !== null) return { ok: false, code: "invalid_message", message: tooDeepMessage(deep) };
  if (
    typeof value === "object" &&
    value !== null &&
    (value as { type?: unknown }).type === "hello" &&
    !SUPPORTED_WIRE_VERSIONS.includes((value as { v?: unknown }).v as number)
  ) {
    return {
      ok: false,
      code: "unsupported_version",
      // Both sides' versions and which one to upgrade: the gateway logs this text and exits 78.
      message: versionRefusal(value as Record<string, unknown>),
      close: CLOSE_UNSUPPORTED_VERSION,
    };
  }
  const parsed = GatewayMessage.safeParse(value);
  if (!parsed.success) {
    return { ok: false, code: "invalid_message", message: describeIssues(fieldIssues(parsed.error)) };
  }
  return { ok: true, message: parsed.data };
}

/**
 * Builds a wire `error` message.
 *
 * @example
 * ```ts
 * ws.send(JSON.stringify(errorFrame("stale_lease", "lease l_1 is not current")));
 * ```
 */
export function errorFrame(code: string, message: string): ControlMessage {
  return { v: WIRE_VERSION, type: "error", code, message };
}
