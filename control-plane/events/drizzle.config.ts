import { defineConfig } from "drizzle-kit";

/** drizzle-kit config of the events DO's schema; run `npm run db:generate` after changing `schema.ts`. */
export default defineConfig({
  out: "./control-plane/events/drizzle",
  schema: "./control-plane/events/schema.ts",
  dialect: "sqlite",
  driver: "durable-sqlite",
});
