//! One process per card image.
//!
//! A card image holds retry counters: two processes writing one image (two
//! running cards, or an offline edit while the card runs) would each count
//! on their own and the last save would win, giving back spent PIN tries.
//! Whoever changes an image holds an [`ImageLock`] for as long as it may
//! write: an exclusive advisory lock (`flock`) on a lock file next to the
//! image, `.NAME.lock`, which also names the holder for the message a
//! second process gets. The lock is released when the value is dropped or
//! the process dies; the lock file stays (removing it would let two
//! processes lock two different files).

use crate::error::ImageError;
use crate::files::{remove_stale_temporaries, split_path};
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The longest holder description read back from a lock file.
const MAX_HOLDER: u64 = 512;

/// An exclusive lock on one card image.
#[derive(Debug)]
pub struct ImageLock {
    file: File,
    path: PathBuf,
    image: PathBuf,
}

impl ImageLock {
    /// Locks the image at `image` for this process, or refuses with
    /// [`ImageError::Locked`] naming the process holding it. `holder`
    /// describes this program (e.g. `pivgate card run`); the lock file
    /// records it with the process id. On success, temporary files that
    /// crashed saves of this image left behind are removed (nobody else can
    /// be saving it now).
    pub fn acquire(image: &Path, holder: &str) -> Result<ImageLock, ImageError> {
        let path = lock_path(image)?;
        let io = |action, source| ImageError::Io {
            action,
            path: image.to_owned(),
            source,
        };
        let mut file = open_lock_file(&path).map_err(|e| io("open the lock file of", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(ImageError::Locked {
                    path: image.to_owned(),
                    holder: read_holder(&mut file),
                })
            }
            Err(TryLockError::Error(e)) => return Err(io("lock", e)),
        }
        let record = format!("pid {}: {}\n", std::process::id(), holder.trim());
        (|| {
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(record.as_bytes())?;
            file.flush()
        })()
        .map_err(|e| io("write the lock file of", e))?;
        remove_stale_temporaries(image)?;
        Ok(ImageLock {
            file,
            path,
            image: image.to_owned(),
        })
    }

    /// The image this lock protects.
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// The lock file.
    pub fn lock_file(&self) -> &Path {
        &self.path
    }
}

impl Drop for ImageLock {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlocking first makes the
        // release independent of other handles to the same open file.
        let _ = self.file.unlock();
    }
}

/// `.NAME.lock` beside the image `NAME`. A symbolic link to an image is
/// followed first, so that the link and the image share one lock.
pub fn lock_path(image: &Path) -> Result<PathBuf, ImageError> {
    // A new image (nothing to resolve yet) is locked under its own name.
    let resolved = std::fs::canonicalize(image).unwrap_or_else(|_| image.to_owned());
    let (dir, name) = split_path(&resolved)?;
    let mut lock = std::ffi::OsString::from(".");
    lock.push(name);
    lock.push(".lock");
    Ok(dir.join(lock))
}

#[cfg(unix)]
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

#[cfg(not(unix))]
fn open_lock_file(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// What the lock file says about its holder, for the refusal message.
fn read_holder(file: &mut File) -> String {
    let mut text = String::new();
    let read = file
        .rewind()
        .and_then(|()| file.take(MAX_HOLDER).read_to_string(&mut text));
    let text = text.trim();
    match read {
        Ok(_) if !text.is_empty() => text.chars().filter(|c| !c.is_control()).collect(),
        _ => "a process that has not written its name yet".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::CardImage;

    #[test]
    fn a_second_lock_on_one_image_is_refused_with_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("card.json");
        CardImage::new_blank(Some(1)).save(&image).unwrap();
        let first = ImageLock::acquire(&image, "pivgate card run").unwrap();
        assert_eq!(first.image(), image);
        // flock locks belong to the open file, so a second open in the same
        // process conflicts like another process would.
        let err = ImageLock::acquire(&image, "pivgate card put-cert").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ImageError::Locked { .. }), "{msg}");
        assert!(
            msg.contains(&format!("pid {}: pivgate card run", std::process::id())),
            "{msg}"
        );
        drop(first);
        let again = ImageLock::acquire(&image, "pivgate card put-cert").unwrap();
        drop(again);
        // The lock file stays, naming the last holder; the image is intact.
        let text = std::fs::read_to_string(lock_path(&image).unwrap()).unwrap();
        assert!(text.contains("put-cert"), "{text}");
        assert_eq!(CardImage::load(&image).unwrap().serial, 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_to_a_locked_image_is_locked_too() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("card.json");
        CardImage::new_blank(Some(1)).save(&image).unwrap();
        let link = dir.path().join("other-name.json");
        std::os::unix::fs::symlink(&image, &link).unwrap();
        let _held = ImageLock::acquire(&image, "pivgate card run").unwrap();
        let err = ImageLock::acquire(&link, "pivgate card put-cert").unwrap_err();
        assert!(matches!(err, ImageError::Locked { .. }), "{err}");
    }

    #[test]
    fn locking_removes_the_temporaries_of_crashed_saves() {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("card.json");
        CardImage::new_blank(Some(1)).save(&image).unwrap();
        let stale = dir.path().join(".card.json.tmp-0123456789abcdef01234567");
        std::fs::write(&stale, "secrets").unwrap();
        let old_style = dir.path().join(".card.json.tmp-4242");
        std::fs::write(&old_style, "secrets").unwrap();
        let other = dir.path().join(".other.json.tmp-0123");
        std::fs::write(&other, "not ours").unwrap();
        let (img, _lock) = CardImage::load_locked(&image, "test").unwrap();
        assert_eq!(img.serial, 1);
        assert!(!stale.exists() && !old_style.exists());
        assert!(other.exists());
    }
}
