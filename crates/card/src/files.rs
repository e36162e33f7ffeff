//! A card image's files on disk: atomic, private writes through a temporary file beside the
//! image, and the removal of temporaries a crashed save left behind. Used by
//! [`crate::image`] to save and by [`crate::lock`] once it holds the lock.

use crate::error::ImageError;
use std::path::{Path, PathBuf};

fn invalid(msg: impl Into<String>) -> ImageError {
    ImageError::Invalid(msg.into())
}

/// The prefix of the temporary files a save of `path` creates, inside
/// `path`'s directory: `.NAME.tmp-` ([`::files::temporary_prefix`]).
pub(crate) fn temporary_prefix(name: &std::ffi::OsStr) -> std::ffi::OsString {
    ::files::temporary_prefix(name)
}

/// The directory and file name of `path`.
pub(crate) fn split_path(path: &Path) -> Result<(PathBuf, std::ffi::OsString), ImageError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| invalid(format!("{} is not a file path", path.display())))?;
    Ok((dir, name.to_owned()))
}

/// Writes `bytes` to `path` atomically with mode 0600, through a temporary
/// file with an unpredictable name created exclusively and without
/// following symbolic links ([`::files::write_atomic`]).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    split_path(path)?;
    ::files::write_atomic(path, bytes).map_err(|source| ImageError::Io {
        action: "write",
        path: path.to_owned(),
        source,
    })
}

/// Removes the temporary files that saves of `path` left behind when their
/// process died between creating and renaming them. Only safe while no
/// other process may be saving `path` (under its [`crate::lock::ImageLock`]).
pub fn remove_stale_temporaries(path: &Path) -> Result<usize, ImageError> {
    let (dir, name) = split_path(path)?;
    let prefix = temporary_prefix(&name);
    let prefix = prefix.as_encoded_bytes();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(ImageError::Io {
                action: "list the directory of",
                path: path.to_owned(),
                source,
            })
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file = entry.file_name();
        let bytes = file.as_encoded_bytes();
        if bytes.len() > prefix.len() && bytes.starts_with(prefix) {
            // A temporary is never a directory; leave anything else alone.
            let is_file = entry
                .file_type()
                .is_ok_and(|t| t.is_file() || t.is_symlink());
            if is_file && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    Ok(removed)
}

#[cfg(not(unix))]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}
