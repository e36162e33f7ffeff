-- Reads whose cost does not grow with the event log.
--
-- The last granted tap of each cardholder at each door, kept by the
-- transaction that appends the tap (an upsert beside the event insert).
-- The anti-passback state is rebuilt at start-up from this table alone: its
-- size is bounded by cardholders × doors, whatever the log holds. Pruning
-- old events leaves it as it is, so a restart after a retention run still
-- knows who is inside. Filled here once from the log it replaces.
CREATE TABLE last_grants (
    door_id BIGINT NOT NULL,
    cardholder_id BIGINT NOT NULL,
    event_id BIGINT NOT NULL,
    PRIMARY KEY (door_id, cardholder_id)
);

INSERT INTO last_grants (door_id, cardholder_id, event_id)
    SELECT door_id, cardholder_id, MAX(id) FROM events
    WHERE kind = 'tap' AND result = 'granted'
        AND door_id IS NOT NULL AND cardholder_id IS NOT NULL
    GROUP BY door_id, cardholder_id;

-- Only the rebuild above read this index.
DROP INDEX events_granted_taps;

-- A door's taps in a time window, newest first (the latency chart): a
-- range of this index, as long as the window's taps, never the door's
-- whole history. The latest tap of each door (the dashboard's door
-- status, seeded at start-up) is this index's last entry for the door:
-- one descent per door, however many non-tap events the door has. One
-- index for both, because every tap's commit pays for each index.
CREATE INDEX events_door_tap_times ON events (door_id, time_us, id) WHERE kind = 'tap';

-- The newest events of one kind (the event list filtered by kind): rare
-- kinds (admin changes among millions of taps) are found without walking
-- the log.
CREATE INDEX events_kind ON events (kind, id);
