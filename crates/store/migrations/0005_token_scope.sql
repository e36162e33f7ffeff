-- API tokens may be bound to doors (a keypad token: the doors whose PINs it
-- may send, ids separated by `,`; NULL for a token bound to none) and to one
-- reader of them, may expire, and remember when they were last used (kept
-- to the minute: the service writes it at most once a minute per token).
ALTER TABLE api_tokens ADD COLUMN doors TEXT;
ALTER TABLE api_tokens ADD COLUMN reader_id BIGINT;
ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
ALTER TABLE api_tokens ADD COLUMN last_used_at BIGINT;
