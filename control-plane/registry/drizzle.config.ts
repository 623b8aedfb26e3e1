import { defineConfig } from "drizzle-kit";

/** drizzle-kit config of the registry DO's schema; run `npm run db:generate` after changing `schema.ts`. */
export default defineConfig({
  out: "./control-plane/registry/drizzle",
  schema: "./control-plane/registry/schema.ts",
  dialect: "sqlite",
  driver: "durable-sqlite",
});
