//! Bounded reading of the files pivgate loads: certificates, trust bundles, CRLs, CHUIDs.
//!
//! Every such file goes through [`read_bounded`]. It is opened without blocking (a FIFO cannot
//! hold the process), checked with `fstat` to be a regular file before a byte is read (so a
//! device such as `/dev/zero` is refused), and read up to a cap suited to its kind, so a huge
//! or endless file costs at most that much memory and is never copied more than once.
//! [`open_bounded`] makes the same checks for a file read in pieces ([`read_at_most`]), as
//! the trust-bundle loader streams a bundle through a fixed window.
//! [`directory_files`] lists a directory of such files without opening anything that is not a
//! regular file, symbolic links included.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// What a file is expected to hold; each kind has its own size cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// One certificate (PEM or DER), e.g. the certificate to validate: at most 1 MiB.
    Certificate,
    /// A file of CA certificates (PEM bundle, DER, PKCS#7), e.g. trust anchors or
    /// intermediates: at most 128 MiB, room for about 100,000 CA certificates in PEM.
    CertificateBundle,
    /// A CRL file (DER or PEM): at most 64 MiB, as for a downloaded CRL.
    Crl,
    /// A CHUID as read from a card: at most 64 KiB (a card object holds at most 16 KiB).
    Chuid,
    /// Another PIV data object as read from a card (Security Object,
    /// biometrics, Printed Information, CCC): at most 64 KiB.
    CardObject,
}

impl InputKind {
    /// The largest file of this kind, in bytes.
    pub const fn limit(self) -> u64 {
        match self {
            InputKind::Certificate => 1 << 20,
            InputKind::CertificateBundle => 128 << 20,
            InputKind::Crl => 64 << 20,
            InputKind::Chuid | InputKind::CardObject => 64 << 10,
        }
    }

    /// What the file should be, for messages.
    pub const fn noun(self) -> &'static str {
        match self {
            InputKind::Certificate => "certificate",
            InputKind::CertificateBundle => "certificate file",
            InputKind::Crl => "CRL file",
            InputKind::Chuid => "CHUID file",
            InputKind::CardObject => "card data object file",
        }
    }
}

/// Why an input file could not be read.
#[derive(Debug, Error)]
pub enum InputError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is {what}, not a regular file: give a {kind}")]
    NotRegular {
        path: PathBuf,
        what: &'static str,
        kind: &'static str,
    },
    #[error("{path} is larger than the {limit}-byte limit for a {kind}")]
    TooLarge {
        path: PathBuf,
        limit: u64,
        kind: &'static str,
    },
}

impl InputError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            InputError::Io { path, .. }
            | InputError::NotRegular { path, .. }
            | InputError::TooLarge { path, .. } => path,
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> InputError + '_ {
    move |source| InputError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What a non-regular file is, for messages.
fn describe(meta: &Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else if meta.file_type().is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    }
}

/// Opens `path` for reading without blocking on a FIFO and without taking a terminal.
fn open(path: &Path) -> std::io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    o.open(path)
}

/// Reads a whole regular file of `kind`, refusing anything else (a FIFO, a device, a
/// directory) and anything larger than [`InputKind::limit`], in bounded time and memory.
pub fn read_bounded(path: &Path, kind: InputKind) -> Result<Vec<u8>, InputError> {
    let (file, len) = open_bounded(path, kind)?;
    let mut data = Vec::with_capacity(len as usize);
    read_at_most(&file, path, kind, &mut data, kind.limit() + 1)?;
    Ok(data)
}

/// Opens a regular file of `kind` for reading in pieces, with the checks of
/// [`read_bounded`] made before a byte is read; returns the file and its size. Read it with
/// [`read_at_most`], which keeps the cap while the file grows.
pub fn open_bounded(path: &Path, kind: InputKind) -> Result<(File, u64), InputError> {
    let file = open(path).map_err(io_error(path))?;
    let meta = file.metadata().map_err(io_error(path))?;
    if !meta.is_file() {
        return Err(InputError::NotRegular {
            path: path.to_owned(),
            what: describe(&meta),
            kind: kind.noun(),
        });
    }
    if meta.len() > kind.limit() {
        return Err(too_large(path, kind));
    }
    Ok((file, meta.len()))
}

/// Appends up to `max` more bytes of `file` (opened by [`open_bounded`]) to `buf` and returns
/// how many it read: fewer than `max` only at the end of the file. An error when the file's
/// current position passes the cap of `kind` (the file grew after it was opened).
pub fn read_at_most(
    mut file: &File,
    path: &Path,
    kind: InputKind,
    buf: &mut Vec<u8>,
    max: u64,
) -> Result<usize, InputError> {
    use std::io::Seek;
    let n = file.take(max).read_to_end(buf).map_err(io_error(path))?;
    let position = file.stream_position().map_err(io_error(path))?;
    if position > kind.limit() {
        return Err(too_large(path, kind));
    }
    Ok(n)
}

/// The line (from 1) holding byte `offset` of the file at `path`, for messages about a file
/// already read in pieces; `None` when it cannot be read again.
pub fn line_at(path: &Path, offset: u64) -> Option<u64> {
    let mut file = open(path).ok()?.take(offset);
    let mut buf = vec![0u8; 64 << 10];
    let mut lines = 1;
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn too_large(path: &Path, kind: InputKind) -> InputError {
    InputError::TooLarge {
        path: path.to_owned(),
        limit: kind.limit(),
        kind: kind.noun(),
    }
}

/// Whether `path` names a directory (following symbolic links).
pub fn is_directory(path: &Path) -> Result<bool, InputError> {
    Ok(std::fs::metadata(path).map_err(io_error(path))?.is_dir())
}

/// The files of directory `dir` holding `kind` files, sorted by name: regular files and
/// symbolic links to regular files. Subdirectories (and links to them) are left out. Any
/// other entry (a FIFO, a device, a socket, a link to one, a dangling link) is an error
/// naming it; nothing is opened to find out.
pub fn directory_files(dir: &Path, kind: InputKind) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        let t = entry.file_type().map_err(io_error(&path))?;
        if t.is_file() {
            files.push(path);
            continue;
        }
        if t.is_dir() {
            continue;
        }
        // A symbolic link is followed only to see what it points at.
        let meta = if t.is_symlink() {
            std::fs::metadata(&path).map_err(io_error(&path))?
        } else {
            entry.metadata().map_err(io_error(&path))?
        };
        if meta.is_file() {
            files.push(path);
        } else if !meta.is_dir() {
            return Err(InputError::NotRegular {
                path,
                what: describe(&meta),
                kind: kind.noun(),
            });
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_regular_files_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.der");
        std::fs::write(&f, [0x30u8; 100]).unwrap();
        assert_eq!(read_bounded(&f, InputKind::Chuid).unwrap().len(), 100);
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; (InputKind::Chuid.limit() + 1) as usize]).unwrap();
        let e = read_bounded(&big, InputKind::Chuid).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("big"), "{e}");
    }

    #[test]
    fn devices_directories_and_missing_files_are_refused() {
        let e = read_bounded(Path::new("/dev/zero"), InputKind::Crl).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = read_bounded(dir.path(), InputKind::Crl).unwrap_err();
        assert!(matches!(e, InputError::NotRegular { .. }), "{e}");
        let e = read_bounded(&dir.path().join("none"), InputKind::Crl).unwrap_err();
        assert!(matches!(e, InputError::Io { .. }), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let e = read_bounded(&fifo, InputKind::Certificate).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = directory_files(dir.path(), InputKind::Certificate).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn directory_listing_follows_links_only_to_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.pem"), "x").unwrap();
        std::fs::write(dir.path().join("a.pem"), "x").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a.pem"), dir.path().join("c.pem")).unwrap();
        let files = directory_files(dir.path(), InputKind::Crl).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.pem", "b.pem", "c.pem"]);
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.pem")).unwrap();
        let e = directory_files(dir.path(), InputKind::Crl).unwrap_err();
        assert!(e.to_string().contains("zero.pem"), "{e}");
        assert!(e.to_string().contains("character device"), "{e}");
    }
}
