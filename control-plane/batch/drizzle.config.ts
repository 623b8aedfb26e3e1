import { defineConfig } from "drizzle-kit";

/** drizzle-kit config of the batch DO's schema; run `npm run db:generate` after changing `schema.ts`. */
export default defineConfig({
  out: "./control-plane/batch/drizzle",
  schema: "./control-plane/batch/schema.ts",
  dialect: "sqlite",
  driver: "durable-sqlite",
});
