//! The many-sites demo (`pivgate demo --sites`): a central on a temporary
//! PostgreSQL cluster and two sites, `north` and `south`, each on its own
//! SQLite database, linked over mutual TLS on loopback with certificates
//! of a test PKI. South reaches the central through a [`LinkCutter`], a
//! TCP proxy the demo controls, so it can be cut off and reconnected.
//!
//! [`SitesDemo`] sets the world up and offers the steps (a change at the
//! central, a tap at a site, waiting until a site has applied everything
//! of its part, cutting south off); narrating them is the demo crate's.
//! Waits follow the sites' follower and uploader status (no polling), each
//! within [`WAIT`].

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderStatus, Door, DoorId, Mechanism, Reader, ReaderId, Schedule,
    Site, SiteId,
};
use host::Transport;
use pki_issue::{CardCredentials, CardOptions, DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use store::testing::TempCluster;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::admin::EntityChange;
use crate::config::{init_template, Config};
use crate::door::TapResult;
use crate::service::Service;
use crate::sync::settings::{CentralConfig, SitesConfig};

/// The longest any step may take.
pub const WAIT: Duration = Duration::from_secs(30);

/// The sites, in order.
pub const SITES: [&str; 2] = ["north", "south"];

/// Why the demo could not go on: the step, and its cause.
#[derive(Debug, thiserror::Error)]
pub enum SitesDemoError {
    /// PostgreSQL could not be started (its binaries missing, or
    /// `initdb`/`pg_ctl` failing): the message says what is needed.
    #[error("the many-sites demo runs its central on a temporary PostgreSQL cluster: {0}")]
    Postgres(#[from] store::testing::ClusterError),
    #[error("{what}")]
    Step {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{0} did not happen within {WAIT:?}")]
    Timeout(String),
}

fn step<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> SitesDemoError {
    move |e| SitesDemoError::Step {
        what: what.into(),
        source: Box::new(e),
    }
}

/// A TCP proxy on loopback in front of the central, for one site: while
/// cut, it closes every connection it carries and every new one at once.
pub struct LinkCutter {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
}

impl LinkCutter {
    /// Listens on a free loopback port, forwarding to `target`; runs on
    /// the current runtime until dropped.
    pub async fn start(target: SocketAddr) -> std::io::Result<LinkCutter> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, rx) = watch::channel(false);
        tokio::spawn(accept(listener, target, rx));
        Ok(LinkCutter { addr, cut })
    }

    /// Where the site connects.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Cuts the link (`true`) or lets it through again (`false`).
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

async fn accept(listener: TcpListener, target: SocketAddr, cut: watch::Receiver<bool>) {
    loop {
        let mut closed = cut.clone();
        let (client, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => continue,
            },
            // Every sender dropped: the proxy is gone.
            _ = closed.wait_for(|_| false) => return,
        };
        if *cut.borrow() {
            continue;
        }
        tokio::spawn(forward(client, target, cut.clone()));
    }
}

async fn forward(mut client: TcpStream, target: SocketAddr, mut cut: watch::Receiver<bool>) {
    let Ok(mut server) = TcpStream::connect(target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.wait_for(|c| *c) => {}
    }
}

/// Puts a card's credentials on a card to tap (the caller's: the service
/// links no card emulator).
pub type Cards = dyn Fn(
        &CardCredentials,
    ) -> Result<Box<dyn Transport + Send>, Box<dyn std::error::Error + Send + Sync>>
    + Send
    + Sync;

/// The demo's world (see the module's documentation).
pub struct SitesDemo {
    pub rt: tokio::runtime::Runtime,
    pub central: Service,
    /// `north` then `south`.
    pub sites: Vec<Service>,
    pub south_link: LinkCutter,
    pub alice: CardCredentials,
    pub bob: CardCredentials,
    /// Each site's reader.
    pub readers: Vec<ReaderId>,
    site_ids: Vec<SiteId>,
    cards: Box<Cards>,
    _pki: TestPki,
    /// Dropped after the services.
    cluster: Option<TempCluster>,
}

impl SitesDemo {
    /// Starts the cluster, the central, and the two sites in `dir`, with
    /// Alice and Bob allowed at both sites' doors; returns once both sites
    /// have applied their part. `cards` makes the cards tapped.
    pub fn start(dir: &Path, cards: Box<Cards>) -> Result<SitesDemo, SitesDemoError> {
        let cluster = TempCluster::start(false)?;
        let pki = TestPki::init(&dir.join("pki"), TestPkiOptions::default())
            .map_err(step("creating the test PKI"))?;
        let card = |name: &str| {
            pki.issue_card(&CardOptions {
                cardholder: name.into(),
                ..CardOptions::default()
            })
            .map_err(step(format!("issuing {name}'s card")))
        };
        let (alice, bob) = (card("Alice")?, card("Bob")?);
        pki.write_device(
            DeviceOptions {
                name: "central".into(),
                role: DeviceRole::Server,
                dns: vec![],
                ips: vec!["127.0.0.1".parse().expect("an address")],
                validity: None,
            },
            &dir.join("central"),
        )
        .map_err(step("issuing the central's certificate"))?;
        for s in SITES {
            pki.write_site(s, &dir.join(s))
                .map_err(step(format!("issuing site {s}'s certificate")))?;
        }
        let text = init_template("sim:north", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
        let path = dir.join("pivgate.toml");
        std::fs::write(&path, text).map_err(step("writing the configuration"))?;
        let mut base = Config::load(&path).map_err(step("reading the configuration"))?;
        base.seed = None;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(step("starting the runtime"))?;

        let mut c = base.clone();
        c.data_dir = dir.join("central-data");
        c.database_url = Some(cluster.url().to_string());
        c.sites = Some(SitesConfig {
            listen: "127.0.0.1:0".parse().expect("an address"),
            cert: dir.join("central/central.pem"),
            key: dir.join("central/central.key.pem"),
            site_ca: vec![dir.join("central/ca.pem")],
            crls: vec![],
            feed_days: 30,
            heartbeat_ms: 1000,
            handshake_ms: 5000,
            late_after_secs: 300,
            max_skew_secs: 30,
        });
        let central = rt
            .block_on(Service::start(c, None))
            .map_err(step("starting the central"))?;
        let sites_addr = central
            .sync()
            .sites_addr
            .ok_or_else(|| SitesDemoError::Timeout("the central's site listener".into()))?;

        // The sites, a door and reader each, one group for both doors.
        let access = central.loaded().access.clone();
        let always = rt
            .block_on(access.change(
                "demo",
                EntityChange::Create(Schedule {
                    id: access::ScheduleId(0),
                    name: "always".into(),
                    windows: vec!["mon-sun 00:00-24:00".parse().expect("a window")],
                    holiday_windows: vec![],
                }),
            ))
            .map_err(step("creating a schedule"))?
            .0;
        let (mut site_ids, mut doors, mut readers) = (Vec::new(), Vec::new(), Vec::new());
        for s in SITES {
            let site = rt
                .block_on(access.change(
                    "demo",
                    EntityChange::Create(Site {
                        id: SiteId(0),
                        name: s.into(),
                        time_zone: "UTC".into(),
                        lockdown: false,
                    }),
                ))
                .map_err(step(format!("creating site {s}")))?
                .0;
            let door = rt
                .block_on(access.change(
                    "demo",
                    EntityChange::Create(Door {
                        id: DoorId(0),
                        site: site.id,
                        name: format!("{s} door"),
                        mechanism: Mechanism::PkiCak,
                        allow_low_assurance: false,
                        passback: Default::default(),
                        mode: Default::default(),
                        unlock_schedule: None,
                        first_card_unlock: false,
                        max_staleness_s: None,
                        stale_policy: Default::default(),
                    }),
                ))
                .map_err(step(format!("creating {s}'s door")))?
                .0;
            let reader = rt
                .block_on(access.change(
                    "demo",
                    EntityChange::Create(Reader {
                        id: ReaderId(0),
                        door: door.id,
                        name: format!("sim:{s}"),
                        connection: format!("sim:{s}"),
                    }),
                ))
                .map_err(step(format!("creating {s}'s reader")))?
                .0;
            site_ids.push(site.id);
            doors.push(door.id);
            readers.push(reader.id);
        }
        rt.block_on(access.change(
            "demo",
            EntityChange::Create(AccessGroup {
                id: access::GroupId(0),
                name: "staff".into(),
                schedule: always.id,
                doors: doors.clone(),
                cardholders: vec![],
            }),
        ))
        .map_err(step("creating the staff group"))?;
        let trust = base
            .trust
            .as_ref()
            .ok_or_else(|| SitesDemoError::Timeout("a trust configuration".into()))?
            .load()
            .map_err(step("loading the trust anchors"))?;
        let authn = crate::enroll::enrollment_authenticator(trust);
        for (card, name) in [(&alice, "Alice"), (&bob, "Bob")] {
            let mut t = cards(card).map_err(|source| SitesDemoError::Step {
                what: format!("{name}'s card"),
                source,
            })?;
            let v = crate::enroll::validate_card(&authn, &mut *t)
                .map_err(step(format!("validating {name}'s card")))?;
            rt.block_on(crate::enroll::register(
                &central.loaded().store,
                &v,
                name,
                Some("staff"),
                "demo",
                Timestamp::now(),
            ))
            .map_err(step(format!("enrolling {name}")))?;
        }

        let south_link = rt
            .block_on(LinkCutter::start(sites_addr))
            .map_err(step("starting south's link proxy"))?;
        let mut sites = Vec::new();
        for (s, addr) in SITES.iter().zip([sites_addr, south_link.addr()]) {
            let mut c = base.clone();
            c.data_dir = dir.join(format!("site-{s}"));
            c.central = Some(CentralConfig {
                urls: vec![format!("https://{addr}")],
                site: s.to_string(),
                cert: dir.join(format!("{s}/{s}.pem")),
                key: dir.join(format!("{s}/{s}.key.pem")),
                ca: dir.join("central/ca.pem"),
                silence_ms: 3000,
                connect_timeout_ms: 2000,
                retry_min_ms: 50,
                retry_max_ms: 500,
                upload_retry_min_ms: 50,
                upload_retry_max_ms: 500,
                upload_linger_ms: 50,
            });
            sites.push(
                rt.block_on(Service::start(c, None))
                    .map_err(step(format!("starting site {s}")))?,
            );
        }
        let demo = SitesDemo {
            rt,
            central,
            sites,
            south_link,
            alice,
            bob,
            readers,
            site_ids,
            cards,
            _pki: pki,
            cluster: Some(cluster),
        };
        for i in 0..SITES.len() {
            demo.caught_up(i)?;
        }
        Ok(demo)
    }

    /// The central's last feed position of site `i`'s part.
    pub fn head(&self, i: usize) -> Result<i64, SitesDemoError> {
        let store = &self.central.loaded().store;
        let mut from = 0;
        loop {
            match self
                .rt
                .block_on(store.feed_after(self.site_ids[i], from, 100_000))
                .map_err(step("reading the change feed"))?
            {
                store::FeedRead::Rows(r) => return Ok(r.last().map_or(from, |r| r.pos)),
                store::FeedRead::Gone { pruned } => from = pruned,
            }
        }
    }

    /// Waits until site `i` has applied every change of its part the
    /// central holds now; returns the position.
    pub fn caught_up(&self, i: usize) -> Result<i64, SitesDemoError> {
        let pos = self.head(i)?;
        self.wait_status(i, "catching up", |s| {
            s.applied.is_some_and(|a| a >= pos) && s.central.is_some()
        })?;
        Ok(pos)
    }

    /// Waits until site `i` has applied position `pos`, from `since`;
    /// how long that took.
    pub fn in_force(&self, i: usize, pos: i64, since: Instant) -> Result<Duration, SitesDemoError> {
        self.wait_status(i, "the change", |s| s.applied.is_some_and(|a| a >= pos))?;
        Ok(since.elapsed())
    }

    /// Waits until site `i`'s follower status satisfies `f` (`what` names
    /// the wait in a timeout).
    fn wait_status(
        &self,
        i: usize,
        what: &str,
        f: impl Fn(&crate::sync::follow::FollowStatus) -> bool,
    ) -> Result<(), SitesDemoError> {
        let follower = self.sites[i]
            .sync()
            .follower
            .as_ref()
            .ok_or_else(|| SitesDemoError::Timeout("a site follower".into()))?;
        let mut rx = follower.status();
        self.rt
            .block_on(async { tokio::time::timeout(WAIT, rx.wait_for(|s| f(s))).await })
            .map_err(|_| SitesDemoError::Timeout(format!("{what} at site {}", SITES[i])))?
            .map_err(step("following the site"))?;
        Ok(())
    }

    /// Suspends (or reinstates, `active`) `name` at the central; the
    /// instant before the change and the position it has in each site's
    /// part.
    pub fn set_status(
        &self,
        name: &str,
        active: bool,
    ) -> Result<(Instant, Vec<i64>), SitesDemoError> {
        let store = &self.central.loaded().store;
        let holder: Cardholder = self
            .rt
            .block_on(store.load_entities())
            .map_err(step("reading the cardholders"))?
            .cardholders
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| SitesDemoError::Timeout(format!("cardholder {name}")))?;
        let status = if active {
            CardholderStatus::Active
        } else {
            CardholderStatus::Suspended {
                reason: "card reported lost".into(),
            }
        };
        let at = Instant::now();
        self.rt
            .block_on(self.central.loaded().access.change(
                "demo",
                EntityChange::Replace(Cardholder { status, ..holder }),
            ))
            .map_err(step(format!("changing {name} at the central")))?;
        let pos = (0..SITES.len())
            .map(|i| self.head(i))
            .collect::<Result<_, _>>()?;
        Ok((at, pos))
    }

    /// Taps `card` at site `i`'s door.
    pub fn tap(&self, i: usize, card: &CardCredentials) -> Result<TapResult, SitesDemoError> {
        let mut t = (self.cards)(card).map_err(|source| SitesDemoError::Step {
            what: "a card".into(),
            source,
        })?;
        self.sites[i]
            .loaded()
            .controller
            .tap(&mut *t, self.readers[i], None, None)
            .map_err(step(format!("a tap at {}", SITES[i])))
    }

    /// Waits until the central holds site `i`'s events up to `seq`; how
    /// many taps of the site it holds.
    pub fn uploaded(&self, i: usize, seq: i64) -> Result<usize, SitesDemoError> {
        let mut rx = self.sites[i]
            .sync()
            .upload
            .clone()
            .ok_or_else(|| SitesDemoError::Timeout("a site uploader".into()))?;
        self.rt
            .block_on(async { tokio::time::timeout(WAIT, rx.wait_for(|p| p.acked >= seq)).await })
            .map_err(|_| SitesDemoError::Timeout(format!("site {}'s upload", SITES[i])))?
            .map_err(step("uploading"))?;
        let held = self
            .rt
            .block_on(self.central.loaded().store.site_events(SITES[i], 1, seq))
            .map_err(step("reading the central's events"))?;
        Ok(held
            .iter()
            .filter(|e| e.event.event.kind == store::EventKind::Tap)
            .count())
    }

    /// Waits until site `i` has lost its link to the central.
    pub fn disconnected(&self, i: usize) -> Result<(), SitesDemoError> {
        let follower = self.sites[i]
            .sync()
            .follower
            .as_ref()
            .ok_or_else(|| SitesDemoError::Timeout("a site follower".into()))?;
        let mut rx = follower.status();
        self.rt
            .block_on(async {
                tokio::time::timeout(WAIT, rx.wait_for(|s| s.central.is_none())).await
            })
            .map_err(|_| SitesDemoError::Timeout(format!("site {} losing its link", SITES[i])))?
            .map_err(step("following the site"))?;
        Ok(())
    }

    /// Stops the sites, the central and the cluster.
    pub fn shutdown(mut self) -> Result<(), SitesDemoError> {
        for s in self.sites.drain(..) {
            self.rt
                .block_on(s.shutdown())
                .map_err(step("stopping a site"))?;
        }
        let central = self.central;
        self.rt
            .block_on(central.shutdown())
            .map_err(step("stopping the central"))?;
        drop(self.cluster.take());
        Ok(())
    }
}
