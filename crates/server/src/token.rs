//! API bearer tokens: 32 random bytes shown once, stored as the SHA-256 of
//! the token text. A token has 256 bits of entropy, so a fast hash is
//! enough: nothing can be guessed from the stored hash.

use access::jiff::Timestamp;
use base64::Engine;
use store::{ApiToken, Role, Store, StoreError};

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

/// Creates a token named `name` with `role`, stores its hash and returns
/// the token text (the only time it is available).
pub async fn create(store: &Store, name: &str, role: Role) -> Result<String, TokenError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(TokenError::BadName(name.to_string()));
    }
    let text = generate()?;
    let t = ApiToken {
        name: name.to_string(),
        role,
        token_hash: hash(&text),
        created_at: Timestamp::now(),
    };
    match store.create_token(&t).await {
        Ok(()) => Ok(text),
        Err(StoreError::Conflict { .. }) => Err(TokenError::Exists(name.to_string())),
        Err(e) => Err(TokenError::Store(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
