CREATE TABLE `counters` (
	`name` text PRIMARY KEY NOT NULL,
	`value` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `gateways` (
	`node_id` text PRIMARY KEY NOT NULL,
	`conn_id` text NOT NULL,
	`credit` integer NOT NULL,
	`capacity` text NOT NULL,
	`connected` integer NOT NULL,
	`connected_at` integer NOT NULL,
	`disconnected_at` integer
);
--> statement-breakpoint
CREATE TABLE `leases` (
	`lease_id` text PRIMARY KEY NOT NULL,
	`session_id` text NOT NULL,
	`batch_id` text NOT NULL,
	`node_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`assigned_at` integer NOT NULL,
	`payload` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `leases_node_idx` ON `leases` (`node_id`);--> statement-breakpoint
CREATE INDEX `leases_session_idx` ON `leases` (`session_id`);--> statement-breakpoint
CREATE TABLE `pending` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`session_id` text NOT NULL,
	`batch_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`priority` integer NOT NULL,
	`payload` text NOT NULL,
	`enqueued_at` integer NOT NULL,
	`reserved_lease` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `pending_session_id_unique` ON `pending` (`session_id`);--> statement-breakpoint
CREATE INDEX `pending_order_idx` ON `pending` (`reserved_lease`,`priority`,`seq`);