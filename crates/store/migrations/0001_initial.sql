-- One schema for SQLite and PostgreSQL: only TEXT and BIGINT columns,
-- standard constraints, no engine-specific types or functions. Times are
-- BIGINT microseconds since the Unix epoch (UTC); dates are TEXT
-- `YYYY-MM-DD`; binary identifiers are lowercase hex TEXT; flags are 0/1.
--
-- Ids are handed out from `id_sequences` inside the inserting transaction
-- (`UPDATE ... RETURNING`), which both engines support. For events this also
-- makes ids follow commit order, so paging by id never skips an event that
-- commits late.

CREATE TABLE id_sequences (
    name TEXT PRIMARY KEY,
    next_id BIGINT NOT NULL
);

INSERT INTO id_sequences (name, next_id) VALUES
    ('site', 1), ('door', 1), ('reader', 1), ('cardholder', 1),
    ('credential', 1), ('schedule', 1), ('access_group', 1),
    ('holiday', 1), ('event', 1);

CREATE TABLE sites (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    time_zone TEXT NOT NULL
);

CREATE TABLE doors (
    id BIGINT PRIMARY KEY,
    site_id BIGINT NOT NULL REFERENCES sites (id),
    name TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    allow_low_assurance BIGINT NOT NULL DEFAULT 0,
    passback TEXT NOT NULL DEFAULT 'none',
    mode TEXT NOT NULL DEFAULT 'normal',
    UNIQUE (site_id, name)
);

CREATE TABLE readers (
    id BIGINT PRIMARY KEY,
    door_id BIGINT NOT NULL REFERENCES doors (id),
    name TEXT NOT NULL,
    connection TEXT NOT NULL UNIQUE
);

CREATE TABLE cardholders (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    status_reason TEXT,
    valid_from BIGINT,
    valid_until BIGINT
);

CREATE TABLE credentials (
    id BIGINT PRIMARY KEY,
    cardholder_id BIGINT NOT NULL REFERENCES cardholders (id),
    card_uuid TEXT UNIQUE,
    fasc_n TEXT UNIQUE,
    cert_sha256 TEXT UNIQUE,
    spki_sha256 TEXT UNIQUE,
    expires_at BIGINT,
    enrolled_at BIGINT NOT NULL,
    enrolled_by TEXT NOT NULL,
    state TEXT NOT NULL,
    state_reason TEXT,
    revoked_at BIGINT
);

CREATE INDEX credentials_cardholder ON credentials (cardholder_id);

CREATE TABLE schedules (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    -- windows as written, separated by `;`: `mon-fri 07:00-19:00;sat 09:00-12:00`
    windows TEXT NOT NULL,
    holiday_windows TEXT NOT NULL
);

CREATE TABLE access_groups (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    schedule_id BIGINT NOT NULL REFERENCES schedules (id)
);

CREATE TABLE access_group_doors (
    group_id BIGINT NOT NULL REFERENCES access_groups (id) ON DELETE CASCADE,
    door_id BIGINT NOT NULL REFERENCES doors (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, door_id)
);

CREATE TABLE access_group_members (
    group_id BIGINT NOT NULL REFERENCES access_groups (id) ON DELETE CASCADE,
    cardholder_id BIGINT NOT NULL REFERENCES cardholders (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, cardholder_id)
);

CREATE TABLE holidays (
    id BIGINT PRIMARY KEY,
    site_id BIGINT REFERENCES sites (id),
    day TEXT NOT NULL,
    name TEXT NOT NULL
);

CREATE TABLE api_tokens (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

-- No foreign keys: an event outlives the door, cardholder or credential it names.
CREATE TABLE events (
    id BIGINT PRIMARY KEY,
    time_us BIGINT NOT NULL,
    kind TEXT NOT NULL,
    door_id BIGINT,
    reader_id BIGINT,
    cardholder_id BIGINT,
    credential_id BIGINT,
    result TEXT,
    code TEXT,
    reason TEXT,
    actor TEXT,
    -- the whole transaction (taps) or the change (admin), JSON
    data TEXT
);

CREATE INDEX events_door ON events (door_id, id);
CREATE INDEX events_cardholder ON events (cardholder_id, id);
CREATE INDEX events_time ON events (time_us);
