DROP INDEX `batches_created_idx`;--> statement-breakpoint
CREATE INDEX `batches_created_id_idx` ON `batches` (`created_at`,`batch_id`);