CREATE TABLE `event_outbox` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`kind` text NOT NULL,
	`batch_id` text,
	`at` integer NOT NULL,
	`data` text NOT NULL
);
--> statement-breakpoint
ALTER TABLE `results` ADD `reward` real;--> statement-breakpoint
ALTER TABLE `results` ADD `error_kind` text;--> statement-breakpoint
ALTER TABLE `results` ADD `error_message` text;--> statement-breakpoint
ALTER TABLE `results` ADD `prompt_tokens` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `response_tokens` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `init_ms` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `ready_ms` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `run_ms` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `postrun_ms` integer;