CREATE TABLE `fence` (
	`id` integer PRIMARY KEY NOT NULL,
	`paused` integer NOT NULL,
	`mode` text,
	`policy_version` text,
	`fence_seq` integer NOT NULL,
	`paused_at` integer,
	`updated_at` integer NOT NULL
);
