-- What the central knows of each site's link, for its dashboard, API and
-- metrics (several central instances share it, so it lives here, not in
-- one instance's memory).
--
-- A central instance records a link when it starts serving a site's feed
-- (`up` = 1, `since_us`, the instance in `central`, the position the site
-- follows from in `followed_from`) under a fresh `link_id`, and marks it
-- down (`up` = 0, `since_us` = when) when that feed ends; a down mark
-- names the `link_id` it ends, so an old feed ending late never marks down
-- the link the site made since, to this or another instance. A link whose
-- instance died without a word stops being "up" by silence: the site
-- reports at least every `report_every_ms`, and the row's `reported_us`
-- (the central's clock at the last report) then ages.
--
-- Each report also carries the position the site has applied (`applied`),
-- its highest event sequence (`last_seq`), the age of its revocation data
-- and access changes (`freshness`, JSON, as the site sent it) and its clock
-- at sending (`report_sent_us`; minus `reported_us`, the skew `skew_us`).
CREATE TABLE site_links (
    site TEXT PRIMARY KEY,
    link_id BIGINT,
    central TEXT,
    peer TEXT,
    up BIGINT NOT NULL DEFAULT 0,
    since_us BIGINT,
    followed_from BIGINT,
    applied BIGINT,
    last_seq BIGINT,
    freshness TEXT,
    report_every_ms BIGINT,
    reported_us BIGINT,
    report_sent_us BIGINT,
    skew_us BIGINT
);

-- The event list filtered by site (`GET /api/v1/events?site=NAME`): the
-- newest or oldest events of one site without walking the log. Only the
-- central's uploaded events have a site.
CREATE INDEX events_site ON events (site, id) WHERE site IS NOT NULL;
