CREATE TABLE `rollout_runs` (
	`id` integer PRIMARY KEY NOT NULL,
	`run` integer NOT NULL
);
