CREATE TABLE "installed_functions" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"revision" integer NOT NULL,
	"sha256" text NOT NULL,
	"rolled_back_from" integer,
	"installed_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "installed_functions_one_row" CHECK ("installed_functions"."id" = 1)
);
