-- Offline as a policy: a door may set the oldest revocation and access data
-- (in seconds) it decides from (NULL: the site's default), and what it does
-- beyond it: `decide` (keep deciding), `refuse`, or `recent-only` (only each
-- cardholder's newest credential).
ALTER TABLE doors ADD COLUMN max_staleness_s BIGINT;
ALTER TABLE doors ADD COLUMN stale_policy TEXT NOT NULL DEFAULT 'decide';
