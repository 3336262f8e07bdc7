import { defineConfig } from "drizzle-kit";

// `npm run db:generate` writes SQL migrations from db/schema.ts into db/migrations (committed);
// start-up applies them (db/migrate.ts). DATABASE_URL is only needed for drizzle-kit's own push/studio.
export default defineConfig({
  dialect: "postgresql",
  schema: "./db/schema.ts",
  out: "./db/migrations",
  dbCredentials: { url: process.env.DATABASE_URL ?? "postgres://postgres:postgres@127.0.0.1:54329/sponsorship" },
  strict: true,
});
