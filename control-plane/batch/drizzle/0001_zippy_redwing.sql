CREATE TABLE `callbacks` (
	`task_index` integer PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`delivered_at` integer,
	`last_error` text
);
--> statement-breakpoint
ALTER TABLE `batch` ADD `cancelled_at` integer;--> statement-breakpoint
ALTER TABLE `outbox` ADD `kind` text DEFAULT 'enqueue' NOT NULL;--> statement-breakpoint
ALTER TABLE `outbox` ADD `payload` text;--> statement-breakpoint
ALTER TABLE `results` ADD `trajectory_key` text;--> statement-breakpoint
ALTER TABLE `results` ADD `trajectory_bytes` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `completions_key` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `started_at` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `deadline_at` integer;--> statement-breakpoint
CREATE INDEX `sessions_deadline_idx` ON `sessions` (`deadline_at`);--> statement-breakpoint
ALTER TABLE `tasks` ADD `cancelled_at` integer;--> statement-breakpoint
ALTER TABLE `tasks` ADD `early_stopped_at` integer;