/**
 * WebSocket close codes of the gateway connection, in one place for both ends: the control plane
 * closes with them, the gateway decides from them whether reconnecting can help. Codes 4000–4999
 * are the application range of RFC 6455; the 44xx ones echo the HTTP status of the same meaning.
 *
 * @module
 */

/**
 * The socket was silent (no ping, no message) for the liveness limit: the gateway reconnects.
 *
 * @example
 * ```ts
 * ws.close(CLOSE_SILENT, "no ping");
 * ```
 */
export const CLOSE_SILENT = 4000;

/**
 * The hello spoke a wire protocol version this control plane does not: final.
 *
 * @example
 * ```ts
 * ws.close(CLOSE_UNSUPPORTED_VERSION, "unsupported_version");
 * ```
 */
export const CLOSE_UNSUPPORTED_VERSION = 4400;

/**
 * The hello named another node than the per-gateway token, or the `node_id` the connection was
 * routed by: final.
 *
 * @example
 * ```ts
 * ws.close(CLOSE_NODE_MISMATCH, "node_id_mismatch");
 * ```
 */
export const CLOSE_NODE_MISMATCH = 4403;

/**
 * A newer connection of the same node replaced this socket: the old socket's owner is gone or
 * about to be.
 *
 * @example
 * ```ts
 * old.close(CLOSE_REPLACED, "replaced by a newer connection");
 * ```
 */
export const CLOSE_REPLACED = 4409;

/**
 * Close codes after which reconnecting cannot help, with what they mean and how to fix them (the
 * gateway stops, and `polar serve_gateway` exits 78, instead of retrying).
 *
 * @example
 * ```ts
 * FATAL_CLOSE_CODES[CLOSE_NODE_MISMATCH]?.fix; // "start the gateway with the --node-id …"
 * ```
 */
export const FATAL_CLOSE_CODES: Readonly<Record<number, { what: string; fix: string }>> = {
  [CLOSE_UNSUPPORTED_VERSION]: {
    what: "it speaks another protocol version",
    // The gateway's refusal names both sides' versions and the side to upgrade (`describeVersionRefusal`).
    fix: "run a gateway and a control plane that share a wire version",
  },
  [CLOSE_NODE_MISMATCH]: {
    what: "its token belongs to another node",
    fix: "start the gateway with the --node-id its per-gateway token was made for, or use a token for this node (polar token create --role gateway --node-id ID --register)",
  },
};
