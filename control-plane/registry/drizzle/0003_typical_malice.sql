ALTER TABLE `batches` ADD `status` text DEFAULT 'running' NOT NULL;--> statement-breakpoint
ALTER TABLE `batches` ADD `harnesses` text DEFAULT ',' NOT NULL;