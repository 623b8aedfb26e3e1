ALTER TABLE `gateways` ADD `metrics` text;--> statement-breakpoint
ALTER TABLE `gateways` ADD `reservations` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `gateways` ADD `draining` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `gateways` ADD `last_seen_at` integer;--> statement-breakpoint
ALTER TABLE `leases` ADD `lost_at` integer;