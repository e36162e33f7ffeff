-- The card authentication certificate (DER, lowercase hex) a credential was
-- enrolled with, for re-validation against current trust and CRLs. NULL for
-- credentials enrolled without one. Not read into the decision snapshot.
ALTER TABLE credentials ADD COLUMN certificate TEXT;
