ALTER TYPE "public"."eligibility_reason" ADD VALUE 'payment_refused';--> statement-breakpoint
CREATE TABLE "ip_blocks" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"cidr" "cidr" NOT NULL,
	"reason" text NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"lifted_at" timestamp (3) with time zone,
	"lifted_by" text,
	CONSTRAINT "ip_blocks_lift_complete" CHECK (("ip_blocks"."lifted_at" IS NULL) = ("ip_blocks"."lifted_by" IS NULL))
);
--> statement-breakpoint
CREATE TABLE "registry_index" (
	"registry_address" text PRIMARY KEY NOT NULL,
	"next_block" bigint NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registry_sponsored_wallets" (
	"registry_address" text NOT NULL,
	"wallet_address" text NOT NULL,
	"block_number" bigint NOT NULL,
	CONSTRAINT "registry_sponsored_wallets_registry_address_wallet_address_pk" PRIMARY KEY("registry_address","wallet_address")
);
--> statement-breakpoint
CREATE TABLE "service_state" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"paused" boolean DEFAULT false NOT NULL,
	"pause_reason" text,
	"paused_at" timestamp (3) with time zone,
	"paused_by" text,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "service_state_one_row" CHECK ("service_state"."id" = 1),
	CONSTRAINT "service_state_pause_has_reason" CHECK (NOT "service_state"."paused" OR ("service_state"."pause_reason" IS NOT NULL AND "service_state"."paused_at" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "sponsorship_budget_counts" (
	"shard" smallint NOT NULL,
	"minute" timestamp (3) with time zone NOT NULL,
	"created" integer NOT NULL,
	"created_total" bigint NOT NULL,
	CONSTRAINT "sponsorship_budget_counts_shard_minute_pk" PRIMARY KEY("shard","minute")
);
--> statement-breakpoint
ALTER TABLE "sponsorship_requests" ADD COLUMN "client_key" text;--> statement-breakpoint
CREATE INDEX "ip_blocks_active_cidr_idx" ON "ip_blocks" USING gist ("cidr" inet_ops) WHERE "ip_blocks"."lifted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "sponsorship_budget_counts_minute_idx" ON "sponsorship_budget_counts" USING btree ("minute");--> statement-breakpoint
-- create_sponsorship_request takes new arguments (the client identity and network, the registry mirror, the
-- budget) and no longer the chain's answer: the old signature goes; the current one lives in
-- db/functions/create_sponsorship_request.sql, which db/migrate.ts applies after the migrations.
DROP FUNCTION IF EXISTS create_sponsorship_request(text, text, timestamptz, int, int, timestamptz, timestamptz, int, text, text, uuid, text, boolean);--> statement-breakpoint
INSERT INTO "service_state" ("id") VALUES (1) ON CONFLICT DO NOTHING;
