/**
 * Bindings of the control-plane Worker (see wrangler.toml). Secrets are optional in the type
 * because a fresh deployment has none: requests are refused with 503 until they are set.
 */
declare namespace Cloudflare {
  interface Env {
    BATCH: DurableObjectNamespace<import("./batch/batch-do").BatchDO>;
    QUEUE: DurableObjectNamespace<import("./queue/queue-do").QueueDO>;
    REGISTRY: DurableObjectNamespace<import("./registry/registry-do").RegistryDO>;
    /** The state-event log behind `GET /v1/events` (one instance, "global"). */
    EVENTS: DurableObjectNamespace<import("./events/events-do").EventsDO>;
    /** Uploaded trajectories and completion records. */
    TRAJECTORIES: R2Bucket;
    /** Failed authentications per source address (auth-throttle.ts); absent: nothing is throttled. */
    AUTH_FAILURES?: RateLimit;
    /** "1" under `polar dev` only: allows callbacks to loopback/private hosts. */
    POLAR_DEV_MODE?: string;
    /** "1": the operator allows callbacks to loopback/private hosts (see callback-url.ts). */
    POLAR_ALLOW_PRIVATE_CALLBACKS?: string;
    /** Seconds a disconnected gateway has to reclaim its leases (default LIMITS.leaseGraceSeconds). */
    POLAR_LEASE_GRACE_SECONDS?: string;
    /** Seconds between gateway pings (default 15); a socket silent for 3 of them is declared dead. */
    POLAR_PING_INTERVAL_SECONDS?: string;
    /** Seconds after a session's budget before it ends as TIMEOUT (default LIMITS.deadlineGraceSeconds). */
    POLAR_DEADLINE_GRACE_SECONDS?: string;
    /** Seconds a queue may have no gateway before its waiting sessions end (default LIMITS.noGatewaySeconds). */
    POLAR_NO_GATEWAY_SECONDS?: string;
    /** Seconds allowed on top of a pause's `timeout_seconds` for the gateways' answers to arrive (default 5). */
    POLAR_FENCE_ACK_MARGIN_SECONDS?: string;
    /** Shards per queue, `queue=N` or `prefix*=N`, comma-separated (see queue/shards.ts); default 1. */
    POLAR_QUEUE_SHARDS?: string;
    /** Seconds between heartbeat comments of an idle `GET /v1/events` stream (default 15). */
    POLAR_EVENTS_HEARTBEAT_SECONDS?: string;
    POLAR_TRAINER_TOKEN?: string;
    POLAR_GATEWAY_TOKEN?: string;
    POLAR_ADMIN_TOKEN?: string;
    /** Read-only token of dashboards (`viewer` role); the trainer and admin tokens satisfy it too. */
    POLAR_VIEWER_TOKEN?: string;
  }
  interface GlobalProps {
    mainModule: typeof import("./index");
    durableNamespaces: "BatchDO" | "QueueDO" | "RegistryDO" | "EventsDO";
  }
}

interface Env extends Cloudflare.Env {}

declare module "*.sql" {
  const text: string;
  export default text;
}

declare module "*/drizzle/migrations.js" {
  const migrations: {
    journal: { entries: { idx: number; when: number; tag: string; breakpoints: boolean }[] };
    migrations: Record<string, string>;
  };
  export default migrations;
}
