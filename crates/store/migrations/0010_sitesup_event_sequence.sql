-- Events flow up from each site to the central exactly once.
--
-- At a site, an event's sequence is its id: handed out from
-- `id_sequences` inside the transaction that inserts the event (see
-- migration 1), so ids are dense and follow commit order on SQLite, where
-- one writer commits at a time and a rolled-back transaction gives its ids
-- back. The site needs no column of its own for it.
--
-- At the central, an event uploaded by a site keeps where it came from:
-- the site (its authenticated name) and the site's sequence, unique
-- together, so a batch sent again is inserted `ON CONFLICT DO NOTHING`;
-- `time_us` stays the site's time of the event, `received_at_us` is the
-- central's time when it stored it, and `late` (0/1) marks an event that
-- arrived longer after its site time than the central allows. The
-- central's own events leave these columns NULL (and out of the index).
ALTER TABLE events ADD COLUMN site TEXT;
ALTER TABLE events ADD COLUMN site_seq BIGINT;
ALTER TABLE events ADD COLUMN received_at_us BIGINT;
ALTER TABLE events ADD COLUMN late BIGINT;

CREATE UNIQUE INDEX events_site_seq ON events (site, site_seq) WHERE site IS NOT NULL;

-- The central's state per site: `acked` is the highest sequence up to
-- which it holds every event of the site (the acknowledgement it gives);
-- it only grows. `skew_us` is the site's clock minus the central's at the
-- last batch, and `skewed` (0/1) whether that was beyond the allowed skew
-- (an event is raised when it becomes so, and when it is back within).
-- The row is also the lock that serialises two uploads of one site
-- reaching two central instances at once.
CREATE TABLE site_uploads (
    site TEXT PRIMARY KEY,
    acked BIGINT NOT NULL,
    skew_us BIGINT,
    skewed BIGINT NOT NULL DEFAULT 0,
    last_batch_us BIGINT
);

-- At a site: the central's last acknowledgement (one row, id 1), written
-- when it is received. Its presence makes the site an uploading one:
-- from then on no event above `acked` is pruned, whatever its age.
CREATE TABLE upload_cursor (
    id BIGINT PRIMARY KEY,
    acked BIGINT NOT NULL,
    skew_us BIGINT,
    acked_at_us BIGINT
);
