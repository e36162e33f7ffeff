//! [`ImageError`]: why a card image could not be loaded, saved, locked or changed. Below
//! [`crate::image`], [`crate::files`] and [`crate::lock`], which all return it.

use crate::crypto::CryptoError;
use std::path::PathBuf;
use thiserror::Error;

/// Why an image could not be loaded, saved or changed.
#[derive(Debug, Error)]
pub enum ImageError {
    #[error("cannot {action} card image {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("card image {path} already exists (use --force to overwrite)")]
    Exists { path: PathBuf },
    #[error("card image {path} is in use by another process ({holder}); stop it first")]
    Locked { path: PathBuf, holder: String },
    #[error("cannot read {what} {path}: {reason}")]
    BadFile {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("card image is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("card image is invalid: {0}")]
    Invalid(String),
    #[error("key rejected: {0}")]
    Crypto(#[from] CryptoError),
}
