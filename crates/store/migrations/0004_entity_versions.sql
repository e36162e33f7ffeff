-- Every access entity carries a version, raised by each change to it: the
-- API answers with it as an ETag, and a change made against an older
-- version (If-Match) is refused instead of silently undoing a newer one.
ALTER TABLE sites ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE doors ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE readers ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE cardholders ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE credentials ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE schedules ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE holidays ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE access_groups ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
