/**
 * Bindings of the control-plane Worker (see wrangler.toml). Secrets are optional in the type
 * because a fresh deployment has none: requests are refused with 503 until they are set.
 */
declare namespace Cloudflare {
  interface Env {
    BATCH: DurableObjectNamespace<import("./batch/batch-do").BatchDO>;
    QUEUE: DurableObjectNamespace<import("./queue/queue-do").QueueDO>;
    POLAR_TRAINER_TOKEN?: string;
    POLAR_GATEWAY_TOKEN?: string;
    POLAR_ADMIN_TOKEN?: string;
  }
  interface GlobalProps {
    mainModule: typeof import("./index");
    durableNamespaces: "BatchDO" | "QueueDO";
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
