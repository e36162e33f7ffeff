-- Revocation data a central downloaded (CRLs), sent down the change feed.
--
-- Central (PostgreSQL): each CRL a central instance downloads that differs
-- from the last one recorded for its distribution point is a row under a
-- feed position allocated like the entities' (`feed` row of
-- `id_sequences`, under the same advisory lock), so it is ordered with
-- them; it is for every site (revocation data is everyone's part). `kind`
-- is `crl`; `source` the distribution point's URL; `fetched_us` when the
-- central downloaded it (the age sites count their revocation data from);
-- `body` the DER, hex-encoded.
--
-- Site (SQLite): the latest row of each (kind, source) the central sent,
-- stored in the same transaction as the feed position that brought it.
CREATE TABLE sync_revocation_data (
    pos BIGINT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    fetched_us BIGINT NOT NULL,
    time_us BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (pos, kind, source)
);

CREATE INDEX sync_revocation_data_source ON sync_revocation_data (kind, source, pos);
