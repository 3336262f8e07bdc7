CREATE TABLE "sponsorship_budget_windows" (
	"minute" timestamp (3) with time zone PRIMARY KEY NOT NULL,
	"hour_settled" bigint NOT NULL,
	"day_settled" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sponsorship_budget_counts" DROP COLUMN "created_total";