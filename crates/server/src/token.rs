//! API bearer tokens: 32 random bytes shown once, stored as the SHA-256 of
//! the token text. A token has 256 bits of entropy, so a fast hash is
//! enough: nothing can be guessed from the stored hash.

use access::jiff::Timestamp;
use access::{DoorId, ReaderId};
use base64::Engine;
use store::{ApiToken, Role, Store, StoreError};

use crate::admin::{AccessData, ChangeError, CreateToken};

/// Every token starts with this, so a leaked one is recognisable.
pub const PREFIX: &str = "pvg_";

/// Why a token could not be created.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the random generator failed")]
    Random,
    #[error("token name `{0}`: use 1 to 64 letters, digits, `-`, `_` or `.`")]
    BadName(String),
    #[error("a token named `{0}` already exists")]
    Exists(String),
    #[error("--expires {0}")]
    BadExpiry(String),
    #[error(transparent)]
    Refused(ChangeError),
    #[error(transparent)]
    Store(StoreError),
}

/// The stored form of a token: hex SHA-256 of its text.
pub fn hash(token: &str) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes()).as_ref())
}

/// A new random token text.
pub fn generate() -> Result<String, TokenError> {
    let mut secret = [0u8; 32];
    aws_lc_rs::rand::fill(&mut secret).map_err(|_| TokenError::Random)?;
    Ok(format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    ))
}

/// Whether `name` is a usable token name.
fn check_name(name: &str) -> Result<(), TokenError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(TokenError::BadName(name.to_string()))
    }
}

/// Creates a token named `name` with `role`, bound to nothing and never
/// expiring, stores its hash and returns the token text (the only time it
/// is available). Records no event: for seeding a fresh database; every
/// other creation goes through [`issue`].
pub async fn create(store: &Store, name: &str, role: Role) -> Result<String, TokenError> {
    check_name(name)?;
    let text = generate()?;
    let t = ApiToken::new(name, role, hash(&text), Timestamp::now());
    match store.create_token(&t).await {
        Ok(()) => Ok(text),
        Err(StoreError::Conflict { .. }) => Err(TokenError::Exists(name.to_string())),
        Err(e) => Err(TokenError::Store(e)),
    }
}

/// What a new token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub name: String,
    pub role: Role,
    /// The doors a keypad token may send PINs to (at least one; none for
    /// other roles).
    pub doors: Vec<DoorId>,
    /// The one reader of those doors its PINs are for (keypad only).
    pub reader: Option<ReaderId>,
    pub expires_at: Option<Timestamp>,
}

/// Creates the token `new` through the change path, so its creation is an
/// admin event naming `actor` (never the secret), and returns the token
/// text (the only time it is available) with the token as stored.
pub async fn issue(
    access: &AccessData,
    actor: &str,
    new: NewToken,
) -> Result<(String, ApiToken), TokenError> {
    check_name(&new.name)?;
    let text = generate()?;
    let t = ApiToken {
        doors: new.doors,
        reader: new.reader,
        expires_at: new.expires_at,
        ..ApiToken::new(&new.name, new.role, hash(&text), Timestamp::now())
    };
    match access.change(actor, CreateToken(t)).await {
        Ok((t, _)) => Ok((text, t)),
        Err(ChangeError::Conflict { .. }) => Err(TokenError::Exists(new.name)),
        Err(e) => Err(TokenError::Refused(e)),
    }
}

/// A name for a token created without one: its role and 8 random characters.
pub fn default_name(role: Role) -> Result<String, TokenError> {
    Ok(format!("{role}-{}", &generate()?[4..12]))
}

/// A token's doors for people: `1,2`, or `1 (reader 3)` when bound to one
/// reader; `None` when bound to no door.
pub fn doors_text(doors: &[DoorId], reader: Option<ReaderId>) -> Option<String> {
    if doors.is_empty() {
        return None;
    }
    let list = doors
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    Some(match reader {
        Some(r) => format!("{list} (reader {r})"),
        None => list,
    })
}

/// What is said of a token just created, before its text is shown.
pub fn created_line(t: &ApiToken) -> String {
    format!(
        "token `{}` (role {}{}{}); shown once, store it now:",
        t.name,
        t.role,
        doors_text(&t.doors, t.reader)
            .map(|d| format!(", doors {d}"))
            .unwrap_or_default(),
        t.expires_at
            .map(|e| format!(", expires {e}"))
            .unwrap_or_default()
    )
}

/// The tokens for people: a header line, then one tab-separated line each
/// (name, role, doors, created, expires, last used).
pub fn list_text(tokens: &[ApiToken]) -> String {
    let opt = |t: Option<Timestamp>| t.map_or_else(|| "never".to_string(), |t| t.to_string());
    let mut s = String::from("name\trole\tdoors\tcreated\texpires\tlast used\n");
    for t in tokens {
        s.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            t.name,
            t.role,
            doors_text(&t.doors, t.reader).unwrap_or_else(|| "-".into()),
            t.created_at,
            opt(t.expires_at),
            opt(t.last_used_at),
        ));
    }
    s
}

/// `--expires`: a duration from `now` (`90d`, `12h`, `30m`, `2w`, `45s`)
/// or an RFC 3339 time; it must be in the future.
pub fn parse_expiry(text: &str, now: Timestamp) -> Result<Timestamp, TokenError> {
    let bad = |why: &str| TokenError::BadExpiry(format!("`{text}`: {why}"));
    let t = text.trim();
    let at = if let Ok(at) = t.parse::<Timestamp>() {
        at
    } else {
        let split = t
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| bad("a duration needs a unit (s, m, h, d or w)"))?;
        let (n, unit) = t.split_at(split);
        let n: i64 = n
            .parse()
            .map_err(|_| bad("not a number followed by s, m, h, d or w, nor an RFC 3339 time"))?;
        let unit_s = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 604_800,
            _ => return Err(bad("the unit is not s, m, h, d or w")),
        };
        let secs = n
            .checked_mul(unit_s)
            .and_then(|s| s.checked_add(now.as_second()))
            .ok_or_else(|| bad("too far ahead"))?;
        Timestamp::from_second(secs).map_err(|_| bad("too far ahead"))?
    };
    if at <= now {
        return Err(bad("that is not in the future"));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_names_the_doors_and_reader_of_each_token() {
        assert_eq!(doors_text(&[], Some(ReaderId(3))), None);
        assert_eq!(doors_text(&[DoorId(1), DoorId(2)], None).unwrap(), "1,2");
        assert_eq!(
            doors_text(&[DoorId(1)], Some(ReaderId(3))).unwrap(),
            "1 (reader 3)"
        );
        let at: Timestamp = "2030-01-02T03:04:05Z".parse().unwrap();
        let keypad = ApiToken {
            doors: vec![DoorId(1)],
            reader: Some(ReaderId(3)),
            expires_at: Some(at),
            ..ApiToken::new("pad", Role::Keypad, "h".into(), at)
        };
        let admin = ApiToken::new("adm", Role::Admin, "h".into(), at);
        assert_eq!(
            list_text(&[admin, keypad.clone()]),
            "name\trole\tdoors\tcreated\texpires\tlast used\n\
             adm\tadmin\t-\t2030-01-02T03:04:05Z\tnever\tnever\n\
             pad\tkeypad\t1 (reader 3)\t2030-01-02T03:04:05Z\t2030-01-02T03:04:05Z\tnever\n"
        );
        assert_eq!(
            created_line(&keypad),
            "token `pad` (role keypad, doors 1 (reader 3), expires 2030-01-02T03:04:05Z); \
             shown once, store it now:"
        );
        assert!(default_name(Role::Viewer).unwrap().starts_with("viewer-"));
    }

    #[test]
    fn tokens_are_random_and_hash_stably() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 43, "{a}");
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a).len(), 64);
    }

    #[test]
    fn expiry_is_a_duration_or_a_time_in_the_future() {
        let now: Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        let at = |t: &str| parse_expiry(t, now).map(|t| t.to_string());
        assert_eq!(at("90d").unwrap(), "2027-02-24T12:00:00Z");
        assert_eq!(at("12h").unwrap(), "2026-11-27T00:00:00Z");
        assert_eq!(at("2w").unwrap(), "2026-12-10T12:00:00Z");
        assert_eq!(at("2027-01-01T00:00:00Z").unwrap(), "2027-01-01T00:00:00Z");
        for bad in [
            "",
            "90",
            "d",
            "90y",
            "-5d",
            "2020-01-01T00:00:00Z",
            "0s",
            "99999999999999999w",
        ] {
            let e = at(bad).unwrap_err();
            assert!(e.to_string().starts_with("--expires"), "{bad}: {e}");
        }
    }
}
