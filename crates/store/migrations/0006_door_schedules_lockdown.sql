-- Scheduled door modes: a door may be held unlocked inside the windows of a
-- schedule (NULL for none), optionally only after the first granted tap of
-- each window. A site may be locked down: no tap is granted at its doors and
-- scheduled unlocks do not apply. A door's schedule must exist: the access
-- snapshot built before every change commits refuses a dangling one.
ALTER TABLE doors ADD COLUMN unlock_schedule_id BIGINT;
ALTER TABLE doors ADD COLUMN first_card_unlock BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sites ADD COLUMN lockdown BIGINT NOT NULL DEFAULT 0;
