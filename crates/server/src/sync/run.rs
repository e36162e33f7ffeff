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
            plan.central = Some((listener, tls, central));
        }
        if let Some(c) = &config.central {
            plan.follower = Some(Follower::new(c, store.clone(), access.clone())?);
            plan.upload.min_backoff = Duration::from_millis(c.upload_retry_min_ms);
            plan.upload.max_backoff = Duration::from_millis(c.upload_retry_max_ms);
        }
        Ok(plan)
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
                central_router(central.clone(), self.ingest),
                stop.clone(),
            )));
            r.tasks.push(tokio::spawn(super::feed::prune(
                self.store.clone(),
                self.feed_days,
                stop.clone(),
            )));
            r.central = Some(central);
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
