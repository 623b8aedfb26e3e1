CREATE TABLE `path_tokens` (
	`sha256` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`queue` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE INDEX `path_tokens_name_idx` ON `path_tokens` (`name`);