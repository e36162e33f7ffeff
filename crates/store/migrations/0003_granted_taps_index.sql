-- Anti-passback state is rebuilt at start-up from the last granted tap of
-- each cardholder at each in/out door. This partial index holds only granted
-- taps, ordered for that query (door, cardholder, latest id), so start-up
-- reads the index alone instead of every event row at those doors.
CREATE INDEX events_granted_taps ON events (door_id, cardholder_id, id)
    WHERE kind = 'tap' AND result = 'granted';
