ALTER TABLE `results` ADD `logs_key` text;--> statement-breakpoint
ALTER TABLE `results` ADD `logs_bytes` integer;--> statement-breakpoint
ALTER TABLE `results` ADD `tokens_key` text;--> statement-breakpoint
ALTER TABLE `results` ADD `tokens_bytes` integer;