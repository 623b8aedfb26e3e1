ALTER TABLE `gateways` ADD `lease_count` integer DEFAULT 0 NOT NULL;
--> statement-breakpoint
UPDATE `gateways` SET `lease_count` = (SELECT count(*) FROM `leases` WHERE `leases`.`node_id` = `gateways`.`node_id`);
--> statement-breakpoint
CREATE TRIGGER `leases_count_insert` AFTER INSERT ON `leases` BEGIN
	UPDATE `gateways` SET `lease_count` = `lease_count` + 1 WHERE `node_id` = NEW.`node_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `leases_count_delete` AFTER DELETE ON `leases` BEGIN
	UPDATE `gateways` SET `lease_count` = `lease_count` - 1 WHERE `node_id` = OLD.`node_id`;
END;
--> statement-breakpoint
CREATE TRIGGER `leases_count_move` AFTER UPDATE OF `node_id` ON `leases` WHEN OLD.`node_id` <> NEW.`node_id` BEGIN
	UPDATE `gateways` SET `lease_count` = `lease_count` - 1 WHERE `node_id` = OLD.`node_id`;
	UPDATE `gateways` SET `lease_count` = `lease_count` + 1 WHERE `node_id` = NEW.`node_id`;
END;
