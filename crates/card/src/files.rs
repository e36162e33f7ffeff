//! A card image's files on disk: atomic, private writes through a temporary file beside the
//! image, and the removal of temporaries a crashed save left behind. Used by
//! [`crate::image`] to save and by [`crate::lock`] once it holds the lock.

use crate::crypto;
use crate::error::ImageError;
use std::io::Write;
use std::path::{Path, PathBuf};

fn invalid(msg: impl Into<String>) -> ImageError {
    ImageError::Invalid(msg.into())
}

/// The prefix of the temporary files a save of `path` creates, inside
/// `path`'s directory: `.NAME.tmp-`.
pub(crate) fn temporary_prefix(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".tmp-");
    prefix
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
/// following symbolic links.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    let io = |action, source| ImageError::Io {
        action,
        path: path.to_owned(),
        source,
    };
    let (dir, name) = split_path(path)?;
    let mut random = [0u8; 12];
    crypto::random(&mut random)?;
    let mut tmp_name = temporary_prefix(&name);
    tmp_name.push(hex::encode(random));
    let tmp = dir.join(tmp_name);
    let mut f = open_private(&tmp).map_err(|e| io("create", e))?;
    let result = (|| {
        f.write_all(bytes).map_err(|e| io("write", e))?;
        f.sync_all().map_err(|e| io("sync", e))?;
        std::fs::rename(&tmp, path).map_err(|e| io("replace", e))?;
        sync_dir(&dir).map_err(|e| io("sync directory of", e))
    })();
    drop(f);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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

#[cfg(unix)]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(not(unix))]
fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}
