//! Files the service and the tools keep: secret key files, read only when
//! nobody but their owner — the running user — can read them, and written
//! atomically with mode 0600; and atomic, durable replacement of any file.
//!
//! This crate owns how such files are opened, checked and replaced, once for
//! the whole workspace. It knows nothing of what the keys are for (OSDP
//! secure channel keys, TLS private keys, card images): callers parse the
//! bytes and wrap the errors in their own. It must not log, and must never
//! write through a symbolic link or into an existing file.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

/// Why a secret file was refused. Each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("cannot read the key file: {0}")]
    Unreadable(#[source] std::io::Error),
    #[error("the key file is not a regular file")]
    NotAFile,
    #[error("the key file is larger than {max} bytes")]
    TooLarge { max: u64 },
    #[error("the key file has mode {mode:04o}, readable by others: run `chmod 600 {path}`", path = path.display())]
    Mode { mode: u32, path: PathBuf },
    #[error(
        "the key file is owned by user {owner}, not by the running user {me}: run `chown {me} {path}`",
        path = path.display()
    )]
    Owner { owner: u32, me: u32, path: PathBuf },
    #[error("not a key: the file must hold {digits} hex digits ({bytes} bytes)", digits = bytes * 2)]
    Format { bytes: usize },
}

/// A secret file that was refused: the file and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}", path = path.display())]
pub struct KeyFileError {
    pub path: PathBuf,
    #[source]
    pub problem: Problem,
}

/// The largest secret file read (a PEM private key is a few KiB).
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// The effective user id of this process.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks that `meta` (of `path`) is a regular file that only its owner can
/// read, and that its owner is the running user.
pub fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyFileError> {
    let fail = |problem| KeyFileError {
        path: path.to_owned(),
        problem,
    };
    if !meta.is_file() {
        return Err(fail(Problem::NotAFile));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(fail(Problem::Mode {
            mode,
            path: path.to_owned(),
        }));
    }
    let me = euid();
    if meta.uid() != me {
        return Err(fail(Problem::Owner {
            owner: meta.uid(),
            me,
            path: path.to_owned(),
        }));
    }
    Ok(())
}

/// Checks the secret file at `path` without reading it (for files another
/// library reads, such as a TLS private key).
pub fn check_secret_file(path: &Path) -> Result<(), KeyFileError> {
    read_secret_file(path).map(drop)
}

/// Reads a secret file, refusing one that is not a regular file, that group
/// or others can read, that the running user does not own, or that holds
/// more than [`MAX_SECRET_BYTES`]. The checks are made on the opened file,
/// so they hold for the bytes read. The buffer is wiped on drop.
pub fn read_secret_file(path: &Path) -> Result<Zeroizing<Vec<u8>>, KeyFileError> {
    let fail = |problem| KeyFileError {
        path: path.to_owned(),
        problem,
    };
    // Non-blocking: a FIFO planted at the path is refused, not waited on.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| fail(Problem::Unreadable(e)))?;
    let meta = file.metadata().map_err(|e| fail(Problem::Unreadable(e)))?;
    check_private(path, &meta)?;
    if meta.len() > MAX_SECRET_BYTES {
        return Err(fail(Problem::TooLarge {
            max: MAX_SECRET_BYTES,
        }));
    }
    let mut out = Zeroizing::new(Vec::with_capacity(meta.len() as usize));
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| fail(Problem::Unreadable(e)))?;
    if out.len() as u64 > MAX_SECRET_BYTES {
        return Err(fail(Problem::TooLarge {
            max: MAX_SECRET_BYTES,
        }));
    }
    Ok(out)
}

/// Reads a key of `N` bytes written as hex digits (upper or lower case,
/// surrounding white space allowed) from a secret file
/// ([`read_secret_file`]'s checks).
pub fn read_hex_key<const N: usize>(path: &Path) -> Result<Zeroizing<[u8; N]>, KeyFileError> {
    let bytes = read_secret_file(path)?;
    let mut key = Zeroizing::new([0u8; N]);
    let text = std::str::from_utf8(&bytes).map(str::trim).unwrap_or("");
    if text.len() != 2 * N || hex::decode_to_slice(text, &mut key[..]).is_err() {
        return Err(KeyFileError {
            path: path.to_owned(),
            problem: Problem::Format { bytes: N },
        });
    }
    Ok(key)
}

/// Writes `key` as hex digits and a newline to `path` with mode 0600,
/// atomically ([`write_atomic`]).
pub fn write_hex_key(path: &Path, key: &[u8]) -> std::io::Result<()> {
    let text = Zeroizing::new(format!("{}\n", hex::encode(key)));
    write_atomic(path, text.as_bytes())
}

/// The prefix of the temporary files [`write_atomic`] creates for the file
/// named `name`, inside its directory: `.NAME.tmp-`.
pub fn temporary_prefix(name: &OsStr) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".tmp-");
    prefix
}

/// The directory of `path` (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Replaces `path` with `bytes` atomically and durably, with mode 0600: the
/// bytes go to a fresh file of the same directory with an unpredictable
/// name ([`temporary_prefix`] and random characters), created exclusively
/// (never through a symbolic link, never into an old file), which is synced
/// and renamed over `path`; then the directory is synced. A symbolic link
/// at `path` is replaced, not followed. On failure the temporary file is
/// removed and `path` is unchanged.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = directory_of(path);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a file path", path.display()),
        )
    })?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&temporary_prefix(name))
        .suffix("")
        .rand_bytes(12)
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_written_fresh_never_through_links_or_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = [0x5A; 16];
        // A symbolic link at the key file itself and an old file readable
        // by everyone.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, p.with_extension("tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_hex_key(&p, &key).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(*read_hex_key::<16>(&p).unwrap(), key);

        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_hex_key(&p, &key).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Nothing is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with(".k.tmp-"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn keys_are_read_only_from_private_files_in_hex() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = [0xA5; 16];
        write_hex_key(&p, &key).unwrap();
        assert_eq!(*read_hex_key::<16>(&p).unwrap(), key);
        // Upper case and surrounding white space are fine.
        std::fs::write(&p, format!("  {}\n", hex::encode_upper(key))).unwrap();
        assert_eq!(*read_hex_key::<16>(&p).unwrap(), key);
        std::fs::write(&p, hex::encode([1u8; 15])).unwrap();
        let e = read_hex_key::<16>(&p).unwrap_err().to_string();
        assert!(e.contains("32 hex digits"), "{e}");
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_hex_key::<16>(&p).unwrap_err().to_string();
        assert!(e.contains("mode 0640") && e.contains("chmod 600"), "{e}");
        let e = check_secret_file(&p).unwrap_err();
        assert!(matches!(e.problem, Problem::Mode { mode: 0o640, .. }));
        let e = read_hex_key::<16>(&dir.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
        let e = check_secret_file(dir.path()).unwrap_err();
        assert!(matches!(e.problem, Problem::NotAFile), "{e}");
    }

    #[test]
    fn atomic_writes_replace_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(write_atomic(&dir.path().join("missing/x"), b"x").is_err());
        assert_eq!(temporary_prefix(OsStr::new("a")), OsString::from(".a.tmp-"));
    }
}
