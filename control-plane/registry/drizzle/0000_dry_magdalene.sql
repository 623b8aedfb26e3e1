CREATE TABLE `batches` (
	`batch_id` text PRIMARY KEY NOT NULL,
	`queue` text NOT NULL,
	`tasks` integer NOT NULL,
	`sessions` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `batches_created_idx` ON `batches` (`created_at`);--> statement-breakpoint
CREATE TABLE `gateway_tokens` (
	`sha256` text PRIMARY KEY NOT NULL,
	`node_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE INDEX `gateway_tokens_node_idx` ON `gateway_tokens` (`node_id`);--> statement-breakpoint
CREATE TABLE `nodes` (
	`node_id` text PRIMARY KEY NOT NULL,
	`queue` text NOT NULL,
	`last_seen_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `queues` (
	`name` text PRIMARY KEY NOT NULL,
	`last_seen_at` integer NOT NULL
);
