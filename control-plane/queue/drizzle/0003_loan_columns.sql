DROP INDEX `pending_order_idx`;--> statement-breakpoint
ALTER TABLE `pending` ADD `loan_token` text;--> statement-breakpoint
ALTER TABLE `pending` ADD `lent_to` text;--> statement-breakpoint
ALTER TABLE `pending` ADD `lent_until` integer;--> statement-breakpoint
-- Loans made before these columns existed were the string steal:<lentUntil>:<thief> in reserved_lease.
-- The string stays their token, so a thief that settles after the upgrade still settles them.
UPDATE `pending` SET `loan_token` = `reserved_lease`, `lent_until` = CAST(substr(`reserved_lease`, 7, instr(substr(`reserved_lease`, 7), ':') - 1) AS INTEGER), `lent_to` = substr(`reserved_lease`, 7 + instr(substr(`reserved_lease`, 7), ':')), `reserved_lease` = NULL WHERE `reserved_lease` LIKE 'steal:%';--> statement-breakpoint
CREATE INDEX `pending_loan_idx` ON `pending` (`loan_token`);--> statement-breakpoint
CREATE INDEX `pending_order_idx` ON `pending` (`reserved_lease`,`loan_token`,`priority`,`seq`);--> statement-breakpoint
ALTER TABLE `leases` DROP COLUMN `payload`;