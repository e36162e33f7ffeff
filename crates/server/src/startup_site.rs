//! A service to start and time: a data directory holding the synthetic site
//! of [`access::synthetic`] with N credentials, a PEM bundle of N
//! self-signed CA certificates as trust anchors, and the configuration
//! naming them. Shared by `cargo bench -p server --bench startup` and the
//! `startup` section of `pivgate-bench`, so both measure the same start.

use std::path::{Path, PathBuf};

use pki_issue::{pem_encode, CertificateBuilder, IssueError, KeyAlgorithm, KeyPair};

use crate::config::Config;
use crate::metrics::StartupTimes;
use crate::service::{ServeError, Service};

/// Why the site could not be made or started.
#[derive(Debug, thiserror::Error)]
pub enum StartupSiteError {
    #[error("issuing the anchors: {0}")]
    Issue(#[from] IssueError),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Store(#[from] store::StoreError),
    #[error("starting the service: {0}")]
    Serve(#[from] ServeError),
    #[error("the service loaded {got_anchors} anchors and {got_credentials} credentials, not {anchors} and {credentials}")]
    Loaded {
        anchors: usize,
        credentials: usize,
        got_anchors: usize,
        got_credentials: usize,
    },
}

fn write(path: &Path, data: &[u8]) -> Result<(), StartupSiteError> {
    std::fs::write(path, data).map_err(|source| StartupSiteError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Writes a PEM bundle of `n` distinct self-signed CA certificates (P-256,
/// one key, subjects `CN=Startup CA i,O=pivgate test,C=US`) to `path`.
pub fn write_anchor_bundle(path: &Path, n: usize) -> Result<(), StartupSiteError> {
    let key = KeyPair::generate(KeyAlgorithm::P256)?;
    let mut pem = String::new();
    for i in 0..n {
        let der = CertificateBuilder::new(
            &format!("CN=Startup CA {i},O=pivgate test,C=US"),
            key.spki_der(),
        )?
        .ca(None)
        .self_signed(&key)?;
        pem.push_str(&pem_encode("CERTIFICATE", &der));
    }
    let tmp = path.with_extension("tmp");
    write(&tmp, pem.as_bytes())?;
    std::fs::rename(&tmp, path).map_err(|source| StartupSiteError::Write {
        path: path.to_owned(),
        source,
    })
}

/// The bundle of `n` anchors in `dir`, written by [`write_anchor_bundle`]
/// unless it is already there.
pub fn anchor_bundle(dir: &Path, n: usize) -> Result<PathBuf, StartupSiteError> {
    let path = dir.join(format!("bundle-{n}.pem"));
    if !path.exists() {
        write_anchor_bundle(&path, n)?;
    }
    Ok(path)
}

/// Creates `dir/data` holding the synthetic site with `credentials`
/// credentials (one door).
pub async fn seed_site(dir: &Path, credentials: usize) -> Result<(), StartupSiteError> {
    let store = store::Store::open_data_dir(&dir.join("data")).await?;
    store
        .import_entities(&access::synthetic::site(credentials, 1))
        .await?;
    store.close().await;
    Ok(())
}

/// Writes `dir/pivgate.toml` for the site of [`seed_site`]: HTTP on a free
/// loopback port and, when given, `anchors` (a bundle file) as the trust
/// anchors (revocation off: no CRLs to load).
pub fn write_config(dir: &Path, anchors: Option<&Path>) -> Result<PathBuf, StartupSiteError> {
    let mut text = "data_dir = \"data\"\n[http]\nlisten = \"127.0.0.1:0\"\n".to_string();
    if let Some(bundle) = anchors {
        let bundle = toml::Value::String(bundle.to_string_lossy().into_owned());
        text.push_str(&format!(
            "[trust]\nanchors = [{bundle}]\n[trust.revocation]\nmode = \"off\"\n"
        ));
    }
    let path = dir.join("pivgate.toml");
    write(&path, text.as_bytes())?;
    Ok(path)
}

/// Starts the service configured by [`write_config`] in `dir`, returns its
/// start-up times once ready, and shuts it down.
pub async fn start_to_ready(
    dir: &Path,
    anchors: Option<&Path>,
) -> Result<StartupTimes, StartupSiteError> {
    let config = Config::load(&write_config(dir, anchors)?).map_err(ServeError::from)?;
    let service = Service::start(config, None).await?;
    let times = service.loaded().times;
    service.shutdown().await?;
    Ok(times)
}

/// One warm-up start (page cache, process), then `runs` starts of the
/// site in `dir` with the `anchors` bundle, in the order they ran; each
/// must report `expected` = (anchors, credentials).
pub async fn repeated_starts(
    dir: &Path,
    anchors: Option<&Path>,
    expected: (usize, usize),
    runs: usize,
) -> Result<Starts, StartupSiteError> {
    start_to_ready(dir, anchors).await?;
    let mut all = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let t = start_to_ready(dir, anchors).await?;
        if (t.anchors, t.credentials) != expected {
            return Err(StartupSiteError::Loaded {
                anchors: expected.0,
                credentials: expected.1,
                got_anchors: t.anchors,
                got_credentials: t.credentials,
            });
        }
        all.push(t);
    }
    Ok(Starts(all))
}

/// The start-up times of repeated starts of one site (at least one).
#[derive(Debug, Clone)]
pub struct Starts(Vec<StartupTimes>);

impl Starts {
    /// Each start's times, in the order they ran.
    pub fn runs(&self) -> &[StartupTimes] {
        &self.0
    }

    /// The median of one of the times over the starts (of an even number,
    /// the upper of the two middle values: a time that was measured).
    pub fn median(&self, time: impl Fn(&StartupTimes) -> u64) -> u64 {
        let mut v: Vec<u64> = self.0.iter().map(time).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }

    /// The smallest and largest value one of the times took.
    pub fn range(&self, time: impl Fn(&StartupTimes) -> u64) -> (u64, u64) {
        let v: Vec<u64> = self.0.iter().map(time).collect();
        (
            v.iter().copied().min().unwrap_or(0),
            v.iter().copied().max().unwrap_or(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(ready_us: u64, trust_us: u64) -> StartupTimes {
        StartupTimes {
            trust_us,
            database_us: 0,
            ready_us,
            anchors: 0,
            credentials: 0,
        }
    }

    #[test]
    fn the_median_and_range_of_each_time_over_the_starts() {
        let s = Starts(vec![times(90, 5), times(70, 9), times(300, 7)]);
        assert_eq!(s.median(|t| t.ready_us), 90);
        assert_eq!(s.range(|t| t.ready_us), (70, 300));
        // Each time on its own: the median trust loading is not the median
        // start's.
        assert_eq!(s.median(|t| t.trust_us), 7);
        assert_eq!(s.range(|t| t.trust_us), (5, 9));
        let two = Starts(vec![times(10, 0), times(20, 0)]);
        assert_eq!(two.median(|t| t.ready_us), 20);
    }
}
