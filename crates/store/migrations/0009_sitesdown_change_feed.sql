-- The change feed a central sends down to its sites (a transactional
-- outbox), and the position a site has applied.
--
-- Central (PostgreSQL): a transaction that changes entities writes, before
-- it commits, one row per site whose part of the data it changed, all
-- under one position `pos` allocated last in the transaction from the
-- `feed` row of `id_sequences` while holding a transaction-level advisory
-- lock: the row lock is held until commit, so positions become visible in
-- the order they were allocated and a reader that has seen position P has
-- seen every position below P ("last position seen" skips nothing).
-- `body` is the site's delta as JSON (`access::Delta`); `revocation` is 1
-- when it takes access away. `feed_pruned` is the highest position whose
-- rows may have been deleted: a site behind it bootstraps from a snapshot.
CREATE TABLE sync_feed (
    site_id BIGINT NOT NULL,
    pos BIGINT NOT NULL,
    time_us BIGINT NOT NULL,
    revocation BIGINT NOT NULL DEFAULT 0,
    body TEXT NOT NULL,
    PRIMARY KEY (site_id, pos)
);

CREATE INDEX sync_feed_time ON sync_feed (time_us);

INSERT INTO id_sequences (name, next_id) VALUES ('feed', 1), ('feed_pruned', 0);

-- Site (SQLite): the last feed position applied, written in the same
-- transaction as what it applied; one row (id 1), absent until the first
-- snapshot.
CREATE TABLE sync_applied (
    id BIGINT PRIMARY KEY,
    pos BIGINT NOT NULL,
    time_us BIGINT NOT NULL
);
