CREATE TABLE "relayer_nonce_fills" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"relayer_address" text NOT NULL,
	"nonce" bigint NOT NULL,
	"sponsorship_request_id" uuid,
	"status" "relay_status" DEFAULT 'queued' NOT NULL,
	"reason" text NOT NULL,
	"transaction_hash" text NOT NULL,
	"raw_transaction" text NOT NULL,
	"max_fee_per_gas" numeric(78, 0) NOT NULL,
	"max_priority_fee_per_gas" numeric(78, 0) NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"submitted_at" timestamp (3) with time zone,
	"resolved_at" timestamp (3) with time zone,
	"block_number" bigint,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "relayer_nonce_fills_relayer_lowercase" CHECK ("relayer_nonce_fills"."relayer_address" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "relayer_nonce_fills_hash_format" CHECK ("relayer_nonce_fills"."transaction_hash" ~ '^0x[0-9a-f]{64}$')
);
--> statement-breakpoint
ALTER TABLE "relayer_nonce_fills" ADD CONSTRAINT "relayer_nonce_fills_sponsorship_request_id_sponsorship_requests_id_fk" FOREIGN KEY ("sponsorship_request_id") REFERENCES "public"."sponsorship_requests"("id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "relayer_nonce_fills_hash_key" ON "relayer_nonce_fills" USING btree ("transaction_hash");--> statement-breakpoint
CREATE INDEX "relayer_nonce_fills_relayer_nonce_idx" ON "relayer_nonce_fills" USING btree ("relayer_address","nonce");