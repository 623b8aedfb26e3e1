ALTER TABLE `sessions` ADD `queued_at` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `queue_wait_ms` integer DEFAULT 0 NOT NULL;