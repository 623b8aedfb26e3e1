CREATE TABLE `event_outbox` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`kind` text NOT NULL,
	`batch_id` text,
	`at` integer NOT NULL,
	`data` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `event_snapshots` (
	`name` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`full` text NOT NULL,
	`at` integer NOT NULL
);
