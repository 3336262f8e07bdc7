CREATE TYPE "public"."block_kind" AS ENUM('automatic', 'admin');--> statement-breakpoint
CREATE TYPE "public"."block_subject" AS ENUM('wallet', 'ip');--> statement-breakpoint
CREATE TYPE "public"."eligibility_reason" AS ENUM('eligible', 'wallet_blocked', 'already_sponsored');--> statement-breakpoint
CREATE TYPE "public"."rate_limit_scope" AS ENUM('sponsorship_ip', 'sponsorship_wallet', 'register_ip', 'admin_sign_in');--> statement-breakpoint
CREATE TYPE "public"."relay_status" AS ENUM('queued', 'submitted', 'confirmed', 'failed');--> statement-breakpoint
CREATE TYPE "public"."request_status" AS ENUM('pending', 'approved', 'relayed', 'completed', 'rejected', 'failed');--> statement-breakpoint
CREATE TABLE "admin_actions" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "admin_actions_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"action" text NOT NULL,
	"subject" text,
	"reason" text,
	"session_id" uuid,
	"ip_address" text,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "admin_sessions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"token_hash" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	"revoked_at" timestamp (3) with time zone,
	"ip_address" text,
	"user_agent" text
);
--> statement-breakpoint
CREATE TABLE "blocks" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"subject_type" "block_subject" NOT NULL,
	"subject" text NOT NULL,
	"kind" "block_kind" NOT NULL,
	"reason" text NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone,
	"lifted_at" timestamp (3) with time zone,
	"lifted_by" text,
	"lift_reason" text,
	CONSTRAINT "blocks_automatic_expires" CHECK ("blocks"."kind" <> 'automatic' OR "blocks"."expires_at" IS NOT NULL),
	CONSTRAINT "blocks_wallet_subject_lowercase" CHECK ("blocks"."subject_type" <> 'wallet' OR "blocks"."subject" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "blocks_lift_complete" CHECK (("blocks"."lifted_at" IS NULL) = ("blocks"."lifted_by" IS NULL))
);
--> statement-breakpoint
CREATE TABLE "rate_limit_hits" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "rate_limit_hits_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"scope" "rate_limit_scope" NOT NULL,
	"key" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "relay_transactions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"sponsorship_request_id" uuid NOT NULL,
	"relay_attempt" integer NOT NULL,
	"status" "relay_status" DEFAULT 'queued' NOT NULL,
	"relayer_address" text,
	"nonce" bigint,
	"transaction_hash" text,
	"raw_transaction" text,
	"max_fee_per_gas" numeric(78, 0),
	"max_priority_fee_per_gas" numeric(78, 0),
	"gas_limit" numeric(78, 0),
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"submitted_at" timestamp (3) with time zone,
	"confirmed_at" timestamp (3) with time zone,
	"failed_at" timestamp (3) with time zone,
	"failure_reason" text,
	"block_number" bigint,
	"gas_used" numeric(78, 0),
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "relay_transactions_attempt_positive" CHECK ("relay_transactions"."relay_attempt" >= 1),
	CONSTRAINT "relay_transactions_hash_format" CHECK ("relay_transactions"."transaction_hash" IS NULL OR "relay_transactions"."transaction_hash" ~ '^0x[0-9a-f]{64}$'),
	CONSTRAINT "relay_transactions_relayer_lowercase" CHECK ("relay_transactions"."relayer_address" IS NULL OR "relay_transactions"."relayer_address" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "relay_transactions_failed_has_reason" CHECK ("relay_transactions"."status" <> 'failed' OR ("relay_transactions"."failed_at" IS NOT NULL AND "relay_transactions"."failure_reason" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "relayer_accounts" (
	"address" text PRIMARY KEY NOT NULL,
	"chain_id" integer NOT NULL,
	"next_nonce" bigint DEFAULT 0 NOT NULL,
	"lease_owner" text,
	"lease_expires_at" timestamp (3) with time zone,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "relayer_accounts_address_lowercase" CHECK ("relayer_accounts"."address" ~ '^0x[0-9a-f]{40}$')
);
--> statement-breakpoint
CREATE TABLE "request_events" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "request_events_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"sponsorship_request_id" uuid NOT NULL,
	"from_status" "request_status",
	"to_status" "request_status" NOT NULL,
	"actor" text NOT NULL,
	"reason" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "sponsorship_requests" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"wallet_id" uuid NOT NULL,
	"wallet_address" text NOT NULL,
	"status" "request_status" DEFAULT 'pending' NOT NULL,
	"eligibility_reason" "eligibility_reason",
	"ip_address" text NOT NULL,
	"user_agent" text,
	"requested_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"approved_at" timestamp (3) with time zone,
	"rejected_at" timestamp (3) with time zone,
	"relayed_at" timestamp (3) with time zone,
	"completed_at" timestamp (3) with time zone,
	"failed_at" timestamp (3) with time zone,
	"failure_reason" text,
	"available_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"status_actor" text DEFAULT 'api' NOT NULL,
	"status_reason" text,
	CONSTRAINT "sponsorship_requests_wallet_address_lowercase" CHECK ("sponsorship_requests"."wallet_address" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "sponsorship_requests_timestamps_match_status" CHECK (("sponsorship_requests"."status" <> 'approved' OR "sponsorship_requests"."approved_at" IS NOT NULL)
        AND ("sponsorship_requests"."status" <> 'rejected' OR "sponsorship_requests"."rejected_at" IS NOT NULL)
        AND ("sponsorship_requests"."status" <> 'relayed' OR "sponsorship_requests"."relayed_at" IS NOT NULL)
        AND ("sponsorship_requests"."status" <> 'completed' OR "sponsorship_requests"."completed_at" IS NOT NULL)
        AND ("sponsorship_requests"."status" <> 'failed' OR "sponsorship_requests"."failed_at" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "wallets" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"wallet_address" text NOT NULL,
	"first_seen_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"sponsorship_count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "wallets_wallet_address_lowercase" CHECK ("wallets"."wallet_address" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "wallets_sponsorship_count_non_negative" CHECK ("wallets"."sponsorship_count" >= 0)
);
--> statement-breakpoint
CREATE TABLE "worker_heartbeats" (
	"worker_id" text PRIMARY KEY NOT NULL,
	"hostname" text NOT NULL,
	"pid" integer NOT NULL,
	"started_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"last_beat_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL
);
--> statement-breakpoint
ALTER TABLE "relay_transactions" ADD CONSTRAINT "relay_transactions_sponsorship_request_id_sponsorship_requests_id_fk" FOREIGN KEY ("sponsorship_request_id") REFERENCES "public"."sponsorship_requests"("id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "request_events" ADD CONSTRAINT "request_events_sponsorship_request_id_sponsorship_requests_id_fk" FOREIGN KEY ("sponsorship_request_id") REFERENCES "public"."sponsorship_requests"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sponsorship_requests" ADD CONSTRAINT "sponsorship_requests_wallet_id_wallets_id_fk" FOREIGN KEY ("wallet_id") REFERENCES "public"."wallets"("id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "admin_actions_created_idx" ON "admin_actions" USING btree ("created_at" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "admin_actions_subject_idx" ON "admin_actions" USING btree ("subject");--> statement-breakpoint
CREATE UNIQUE INDEX "admin_sessions_token_hash_key" ON "admin_sessions" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "blocks_active_subject_idx" ON "blocks" USING btree ("subject_type","subject") WHERE "blocks"."lifted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "rate_limit_hits_scope_key_created_idx" ON "rate_limit_hits" USING btree ("scope","key","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "relay_transactions_attempt_key" ON "relay_transactions" USING btree ("sponsorship_request_id","relay_attempt");--> statement-breakpoint
CREATE UNIQUE INDEX "relay_transactions_hash_key" ON "relay_transactions" USING btree ("transaction_hash");--> statement-breakpoint
CREATE INDEX "relay_transactions_open_idx" ON "relay_transactions" USING btree ("status","relayer_address","nonce") WHERE "relay_transactions"."status" IN ('queued', 'submitted');--> statement-breakpoint
CREATE INDEX "relay_transactions_relayer_nonce_idx" ON "relay_transactions" USING btree ("relayer_address","nonce");--> statement-breakpoint
CREATE INDEX "request_events_request_idx" ON "request_events" USING btree ("sponsorship_request_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "sponsorship_requests_one_open_per_wallet" ON "sponsorship_requests" USING btree ("wallet_id") WHERE "sponsorship_requests"."status" IN ('pending', 'approved', 'relayed');--> statement-breakpoint
CREATE INDEX "sponsorship_requests_wallet_history_idx" ON "sponsorship_requests" USING btree ("wallet_id","requested_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE INDEX "sponsorship_requests_queue_idx" ON "sponsorship_requests" USING btree ("status","available_at") WHERE "sponsorship_requests"."status" IN ('pending', 'approved', 'relayed');--> statement-breakpoint
CREATE INDEX "sponsorship_requests_requested_at_idx" ON "sponsorship_requests" USING btree ("requested_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "wallets_wallet_address_key" ON "wallets" USING btree ("wallet_address");