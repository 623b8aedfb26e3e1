CREATE TABLE `batch` (
	`batch_id` text PRIMARY KEY NOT NULL,
	`request_hash` text NOT NULL,
	`queue` text NOT NULL,
	`callback_url` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `counters` (
	`name` text PRIMARY KEY NOT NULL,
	`value` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `outbox` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`queue` text NOT NULL,
	`task_index` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer NOT NULL,
	`last_error` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `result_chunks` (
	`seq` integer NOT NULL,
	`chunk_index` integer NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`seq`, `chunk_index`)
);
--> statement-breakpoint
CREATE TABLE `results` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`session_id` text NOT NULL,
	`lease_id` text NOT NULL,
	`status` text NOT NULL,
	`chars` integer NOT NULL,
	`chunk_count` integer NOT NULL,
	`accepted_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `results_session_id_unique` ON `results` (`session_id`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`session_id` text PRIMARY KEY NOT NULL,
	`task_index` integer NOT NULL,
	`sample_index` integer NOT NULL,
	`status` text NOT NULL,
	`attempt` integer NOT NULL,
	`lease_id` text,
	`node_id` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`assigned_at` integer,
	`finished_at` integer
);
--> statement-breakpoint
CREATE INDEX `sessions_task_idx` ON `sessions` (`task_index`);--> statement-breakpoint
CREATE INDEX `sessions_status_idx` ON `sessions` (`status`);--> statement-breakpoint
CREATE TABLE `tasks` (
	`task_index` integer PRIMARY KEY NOT NULL,
	`task_id` text NOT NULL,
	`queue` text NOT NULL,
	`num_samples` integer NOT NULL,
	`spec` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tasks_task_id_unique` ON `tasks` (`task_id`);