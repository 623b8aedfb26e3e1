import { defineConfig } from "drizzle-kit";

/** drizzle-kit config of the queue DO's schema; run `npm run db:generate` after changing `schema.ts`. */
export default defineConfig({
  out: "./control-plane/queue/drizzle",
  schema: "./control-plane/queue/schema.ts",
  dialect: "sqlite",
  driver: "durable-sqlite",
});
