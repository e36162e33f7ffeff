//! A throw-away PostgreSQL cluster for tests and benchmarks.
//!
//! [`TempCluster::start`] finds the server binaries (`$PIVGATE_PG_BIN`, else
//! the newest `/usr/lib/postgresql/*/bin`, else `initdb` on `PATH`), creates a
//! cluster in a temporary directory with `initdb`, starts it with `pg_ctl`
//! listening only on a Unix socket inside that directory (no TCP), creates a
//! database, and stops the server and removes the directory on drop.
//! PostgreSQL refuses to run as root: when the process is root, every server
//! command runs as the `postgres` system user (created by Debian's
//! `postgresql` package) through `runuser`, and the directory is handed to
//! that user.
//!
//! [`TempCluster::stop`] and [`TempCluster::start_again`] take the server
//! down and bring it back on the same data and URL, for tests of PostgreSQL
//! going away under its clients.
//!
//! [`postgres_or_skip`] is what a test calls: outside CI a machine without
//! PostgreSQL skips the test with a message; with `CI=true` it fails.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Why a cluster could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("PostgreSQL server binaries not found (looked in $PIVGATE_PG_BIN, /usr/lib/postgresql/*/bin and PATH); install the `postgresql` package (scripts/setup.sh does)")]
    NoBinaries,
    #[error("running as root, PostgreSQL must run as another user, but there is no `postgres` user; install the `postgresql` package (scripts/setup.sh does)")]
    NoServiceUser,
    #[error("{step}: {source}")]
    Io {
        step: &'static str,
        source: std::io::Error,
    },
    #[error("{step} failed ({status}):\n{output}")]
    Command {
        step: &'static str,
        status: String,
        output: String,
    },
}

/// A running temporary PostgreSQL server; stopped and removed on drop.
pub struct TempCluster {
    dir: Option<tempfile::TempDir>,
    bin: PathBuf,
    run_as: Option<String>,
    url: String,
    version: String,
    /// The server options `pg_ctl start` passes (`-o`).
    opts: String,
}

impl fmt::Debug for TempCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TempCluster")
            .field("url", &self.url)
            .field("version", &self.version)
            .finish()
    }
}

const USER: &str = "pivgate";
const DATABASE: &str = "pivgate";

/// The newest PostgreSQL `bin` directory on this machine.
pub fn find_binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PIVGATE_PG_BIN") {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").exists().then_some(dir);
    }
    let mut best: Option<(u32, PathBuf)> = None;
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        for e in entries.flatten() {
            let bin = e.path().join("bin");
            let version = e
                .file_name()
                .to_str()
                .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
            if let (Some(v), true) = (version, bin.join("initdb").exists()) {
                if best.as_ref().is_none_or(|(b, _)| v > *b) {
                    best = Some((v, bin));
                }
            }
        }
    }
    if let Some((_, bin)) = best {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
    })
}

fn is_root() -> bool {
    // The owner of /proc/self is the effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn chown_tree(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))?;
    if path.is_dir() {
        for e in std::fs::read_dir(path)? {
            chown_tree(&e?.path(), uid, gid)?;
        }
    }
    Ok(())
}

impl TempCluster {
    /// Starts a cluster. `durable`: keep PostgreSQL's default `fsync=on`
    /// (for benchmarks); otherwise turn it off to make tests fast.
    pub fn start(durable: bool) -> Result<Self, ClusterError> {
        let bin = find_binaries().ok_or(ClusterError::NoBinaries)?;
        let run_as = if is_root() {
            user_ids("postgres").ok_or(ClusterError::NoServiceUser)?;
            Some("postgres".to_string())
        } else {
            None
        };
        // The service user must be able to reach the directory: under root,
        // use /tmp rather than a $TMPDIR that may sit in root's home.
        let base = if run_as.is_some() && Path::new("/tmp").is_dir() {
            PathBuf::from("/tmp")
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("pivgate-pg-")
            .tempdir_in(base)
            .map_err(|source| ClusterError::Io {
                step: "create the cluster directory",
                source,
            })?;
        if let Some(user) = &run_as {
            let (uid, gid) = user_ids(user).ok_or(ClusterError::NoServiceUser)?;
            chown_tree(dir.path(), uid, gid).map_err(|source| ClusterError::Io {
                step: "hand the cluster directory to the postgres user",
                source,
            })?;
        }
        let data = dir.path().join("data");
        let socket_dir = dir.path().to_path_buf();
        let mut cluster = TempCluster {
            dir: Some(dir),
            bin,
            run_as,
            url: String::new(),
            version: String::new(),
            opts: String::new(),
        };
        let out = cluster.run("pg_ctl --version", "pg_ctl", &["--version"])?;
        cluster.version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        cluster.run(
            "initdb",
            "initdb",
            &[
                "-D",
                &data.to_string_lossy(),
                "-U",
                USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
        )?;
        let mut opts = format!(
            "-c listen_addresses='' -k {} -c max_connections=50",
            socket_dir.display()
        );
        if !durable {
            opts.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        cluster.opts = opts;
        cluster.pg_ctl_start()?;
        cluster.run(
            "createdb",
            "createdb",
            &["-h", &socket_dir.to_string_lossy(), "-U", USER, DATABASE],
        )?;
        cluster.url = format!(
            "postgres://{USER}@localhost/{DATABASE}?host={}",
            socket_dir.display()
        );
        Ok(cluster)
    }

    /// A `postgres://` URL for the database, through the Unix socket.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `pg_ctl --version`, e.g. "pg_ctl (PostgreSQL) 15.8".
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Stops the server the way an operator does (`pg_ctl stop -m fast`:
    /// clients are disconnected, committed transactions kept), leaving its
    /// data in place for [`TempCluster::start_again`]. For tests of the
    /// database going away under its clients.
    pub fn stop(&self) -> Result<(), ClusterError> {
        let data = self.dir().join("data");
        self.run(
            "pg_ctl stop",
            "pg_ctl",
            &["-D", &data.to_string_lossy(), "-m", "fast", "-w", "stop"],
        )
        .map(|_| ())
    }

    /// Starts the server again on the same data, socket and URL, after
    /// [`TempCluster::stop`].
    pub fn start_again(&self) -> Result<(), ClusterError> {
        self.pg_ctl_start()
    }

    fn pg_ctl_start(&self) -> Result<(), ClusterError> {
        let data = self.dir().join("data");
        let log = self.dir().join("server.log");
        let started = self.run(
            "pg_ctl start",
            "pg_ctl",
            &[
                "-D",
                &data.to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-o",
                &self.opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        started.map(|_| ()).map_err(|e| ClusterError::Command {
            step: "pg_ctl start",
            status: e.to_string(),
            output: std::fs::read_to_string(&log).unwrap_or_default(),
        })
    }

    fn dir(&self) -> &Path {
        self.dir.as_ref().expect("present until drop").path()
    }

    fn run(
        &self,
        step: &'static str,
        program: &str,
        args: &[&str],
    ) -> Result<Output, ClusterError> {
        let exe = self.bin.join(program);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        // Run from a directory the service user can read.
        cmd.args(args).current_dir(self.dir());
        let out = cmd
            .output()
            .map_err(|source| ClusterError::Io { step, source })?;
        if !out.status.success() {
            return Err(ClusterError::Command {
                step,
                status: out.status.to_string(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
        Ok(out)
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let data = self.dir().join("data");
        if data.join("postmaster.pid").exists() {
            let _ = self.run(
                "pg_ctl stop",
                "pg_ctl",
                &[
                    "-D",
                    &data.to_string_lossy(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
            );
        }
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
    }
}

/// Whether this run is CI (`CI` set to anything but `false`/`0`/empty).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Starts a cluster for a test. Outside CI, a machine where PostgreSQL cannot
/// start gives `None` and a message on stderr (the caller returns early);
/// in CI it panics with the reason, so the test fails.
pub fn postgres_or_skip(test: &str) -> Option<TempCluster> {
    match TempCluster::start(false) {
        Ok(c) => Some(c),
        Err(e) if in_ci() => {
            panic!("{test}: PostgreSQL is required in CI and could not start: {e}")
        }
        Err(e) => {
            eprintln!("{test}: skipped on PostgreSQL, which could not start: {e}");
            None
        }
    }
}
