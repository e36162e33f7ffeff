//! Starting and stopping the central's listener or the site's follower
//! with the service.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use store::{EventLog, Store};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::feed::Central;
use super::follow::Follower;
use super::{central_router, link, SyncError};
use crate::admin::AccessData;
use crate::config::Config;

/// What `[sites]` or `[central]` started.
#[derive(Debug, Default)]
pub struct Running {
    tasks: Vec<JoinHandle<()>>,
    /// The address sites connect to (a central).
    pub sites_addr: Option<SocketAddr>,
    /// The follower (a site).
    pub follower: Option<Arc<Follower>>,
    /// What the site's uploader has sent (a site).
    pub upload: Option<watch::Receiver<super::upload::UploadProgress>>,
    /// The central's site routes (a central).
    pub central: Option<Arc<Central>>,
    /// The central's view of its sites (a central).
    pub board: Option<Arc<super::board::Board>>,
    /// What the site's reporter has sent (a site).
    pub reports: Option<watch::Receiver<super::report::ReportProgress>>,
}

/// Reads the settings and binds the central's listener (nothing is
/// started yet); for a site, makes its follower.
pub struct Plan {
    central: Option<(
        TcpListener,
        Arc<tokio_rustls::rustls::ServerConfig>,
        Arc<Central>,
    )>,
    handshake: Duration,
    feed_days: u32,
    ingest: super::ingest::IngestConfig,
    follower: Option<Arc<Follower>>,
    upload: super::upload::UploadOptions,
    store: Store,
    log: EventLog,
    /// The central's view of its sites.
    board: Option<Arc<super::board::Board>>,
    /// A site's reports: at least this often, with the controller's data
    /// freshness.
    report_every: Duration,
    access: Arc<AccessData>,
}

impl Plan {
    pub async fn new(
        config: &Config,
        store: &Store,
        log: &EventLog,
        access: &Arc<AccessData>,
        stop: &watch::Receiver<bool>,
    ) -> Result<Plan, SyncError> {
        let mut plan = Plan {
            central: None,
            handshake: Duration::from_secs(10),
            feed_days: 30,
            ingest: super::ingest::IngestConfig::default(),
            follower: None,
            upload: super::upload::UploadOptions::default(),
            store: store.clone(),
            log: log.clone(),
            board: None,
            report_every: Duration::from_secs(15),
            access: access.clone(),
        };
        if let Some(s) = &config.sites {
            let tls = link::server_tls(s)?;
            let listener = TcpListener::bind(s.listen)
                .await
                .map_err(|e| SyncError::Invalid {
                    key: "sites.listen",
                    problem: format!("cannot listen on {}: {e}", s.listen),
                })?;
            let central = Central::new(
                store.clone(),
                log.clone(),
                Duration::from_millis(s.heartbeat_ms),
                stop.clone(),
            )?;
            plan.handshake = Duration::from_millis(s.handshake_ms);
            plan.feed_days = s.feed_days;
            plan.ingest = s.ingest();
            plan.board = Some(super::board::Board::new(
                store.clone(),
                instance_name(listener.local_addr().ok()),
            ));
            plan.central = Some((listener, tls, central));
        }
        if let Some(c) = &config.central {
            plan.follower = Some(Follower::new(c, store.clone(), access.clone())?);
            plan.report_every = Duration::from_millis(c.silence_ms / 3);
            plan.upload.min_backoff = Duration::from_millis(c.upload_retry_min_ms);
            plan.upload.max_backoff = Duration::from_millis(c.upload_retry_max_ms);
            plan.upload.linger = Duration::from_millis(c.upload_linger_ms);
        }
        Ok(plan)
    }

    /// The central's view of its sites (a central), for the API and the
    /// metrics.
    pub fn board(&self) -> Option<Arc<super::board::Board>> {
        self.board.clone()
    }

    /// The site's follower, if this is a site.
    pub fn follower(&self) -> Option<&Arc<Follower>> {
        self.follower.as_ref()
    }

    /// Starts what was planned; it runs until `stop`.
    pub fn start(self, stop: &watch::Receiver<bool>) -> Running {
        let mut r = Running::default();
        if let Some((listener, tls, central)) = self.central {
            r.sites_addr = listener.local_addr().ok();
            tracing::info!(addr = ?r.sites_addr, "serving site links");
            r.tasks.push(tokio::spawn(link::serve(
                listener,
                tls,
                self.handshake,
                central_router(
                    central.clone(),
                    self.ingest,
                    self.board.clone().unwrap_or_else(|| {
                        super::board::Board::new(self.store.clone(), instance_name(None))
                    }),
                ),
                stop.clone(),
            )));
            r.tasks.push(tokio::spawn(super::feed::prune(
                self.store.clone(),
                self.feed_days,
                stop.clone(),
            )));
            r.central = Some(central);
            r.board = self.board.clone();
        }
        if let Some(f) = self.follower {
            r.tasks.push(tokio::spawn(f.clone().run(stop.clone())));
            // The site's events go up over the link the follower holds.
            let uploader = super::upload::Uploader::new(
                self.store.clone(),
                self.log.clone(),
                super::upload::LinkUplink::new(&f),
                self.upload,
            );
            r.upload = Some(uploader.progress());
            r.tasks.push(tokio::spawn(uploader.run(stop.clone())));
            // And the site says how it is, over the same link.
            let reporter = super::report::Reporter::new(
                self.store.clone(),
                self.log.clone(),
                f.clone(),
                self.access.controller().cloned(),
                self.report_every,
            );
            r.reports = Some(reporter.progress());
            r.tasks.push(tokio::spawn(reporter.run(stop.clone())));
            r.follower = Some(f);
        }
        r
    }
}

impl Running {
    /// Waits for the tasks to end (after `stop`).
    pub async fn stopped(self) {
        for t in self.tasks {
            if let Err(e) = t.await {
                tracing::error!(error = %e, "a sync task failed");
            }
        }
    }
}

/// How this central instance is named in its sites' status: the machine's
/// host name and the address sites connect to.
fn instance_name(addr: Option<SocketAddr>) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "central".into());
    match addr {
        Some(a) => format!("{host}/{a}"),
        None => host,
    }
}
