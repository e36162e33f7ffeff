//! The door demo's site (`pivgate demo`): its configuration — a front door
//! and a lab (card only) and a server room (card + PIN), staff and a lab
//! crew — and the test PKI's publisher, which serves the CRLs and CA
//! certificates the certificates' distribution points and caIssuers URLs
//! name, on loopback, so that a revocation reaches the service the way a
//! real issuer's does: through the revocation refresh.
//!
//! [`DemoSite`] creates the site in a directory (test PKI, cards, the
//! configuration), starts the service on it with the publisher, API tokens
//! and enrollments; running the taps and printing them is the command
//! line's. The lab's door position switch is wired to an OSDP I/O module
//! (pivgate's own peripheral device, [`DemoSite::start_door_io`]) on a
//! private pseudo-terminal the service serves as its OSDP port, with the
//! secure channel: opening and closing the door there raises and clears
//! the door's alarms through the service's own path.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, RwLock};

use access::jiff::{tz::TimeZone, Timestamp, Zoned};
use auth::Authenticator;
use host::Transport;
use pki_issue::{CardCredentials, CardOptions, IssueError, KeyAlgorithm, TestPki, TestPkiOptions};
use store::Role;

use links::osdp::msg::{capability, Capability, PdId};
use links::osdp::pd::{NoApp, PdConfig, PeripheralDevice};
use links::osdp::sc::Key;
use links::serial::{Link, PdHandle, Pty};

use crate::config::Config;
use crate::service::Service;

/// The simulated readers and the doors they are bound to.
pub const FRONT: &str = "sim:front";
pub const LAB: &str = "sim:lab";
pub const SERVER_ROOM: &str = "sim:server-room";

/// The door whose position switch the demo's OSDP I/O module reports.
pub const ALARM_DOOR: &str = "Lab";
/// The I/O module's address on its bus.
const DOOR_IO_ADDRESS: u8 = 1;
/// The I/O module's line speed.
const DOOR_IO_BAUD: u32 = 115_200;
/// How long the lab's door may stay open after an allowed opening, and
/// how long before that its reader warns: short, so the demo shows a
/// held-open alarm in a second and a half.
pub const HELD_OPEN_MS: u64 = 1500;
pub const PREALARM_MS: u64 = 500;

/// The lab door's I/O module: the line the service serves as an OSDP port
/// and the secure channel key both ends hold.
pub struct DoorIoLine {
    line: Pty,
    key: Key,
}

/// Why the demo's site or publisher could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("encoding the test PKI's published files")]
    Encode(#[source] IssueError),
    #[error("the test PKI publishes no {0}")]
    Missing(&'static str),
    #[error("setting up the CRL publisher")]
    Listen(#[source] std::io::Error),
    #[error("the card has no card-authentication certificate")]
    NoCardAuthentication,
    #[error("revoking the card-authentication certificate")]
    Revoke(#[source] IssueError),
    #[error("opening the pseudo-terminal of the lab door's I/O module")]
    Line(#[source] std::io::Error),
    #[error("starting the lab door's I/O module")]
    DoorIo(#[source] std::io::Error),
    #[error("--listen {0}: the demo serves plain HTTP, so only a loopback address (127.0.0.1 or ::1) is accepted")]
    NotLoopback(SocketAddr),
    /// A step of setting up the site, named as the demo says it.
    #[error("{what}")]
    Step {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Names the failed step.
fn step<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> DemoError {
    move |e| DemoError::Step {
        what: what.into(),
        source: Box::new(e),
    }
}

/// The demo's cardholders: three enrolled, one (Bob) a stranger with a
/// genuine card of the same PKI.
pub struct DemoCards {
    pub ada: CardCredentials,
    pub bob: CardCredentials,
    pub carol: CardCredentials,
    pub dan: CardCredentials,
}

/// The demo site in a directory: its test PKI (whose distribution points
/// name the publisher), cards, configuration and trust.
pub struct DemoSite {
    pub pki: TestPki,
    pub cards: DemoCards,
    pub config: Config,
    /// Validates cards for enrollment (full path, CHUID).
    enroller: Authenticator,
    /// The lab's schedule (the demo taps outside it).
    pub lab_schedule: String,
    /// The time the site was made for.
    pub now: Zoned,
    /// Where the publisher serves the CRLs, `http://127.0.0.1:PORT/crl`.
    pub crl_base: String,
    pub publisher: Arc<CrlPublisher>,
    listener: Option<TcpListener>,
    door_io: DoorIoLine,
}

/// The demo site's service, running, with an admin and a viewer token.
pub struct Started {
    pub service: Service,
    pub admin_token: String,
    pub viewer_token: String,
}

impl DemoSite {
    /// Creates the site in `dir`: a test PKI of `alg`, the four cards, and
    /// the configuration, with the API on `listen` (loopback only) when
    /// given.
    pub fn create(
        dir: &Path,
        alg: KeyAlgorithm,
        listen: Option<SocketAddr>,
    ) -> Result<DemoSite, DemoError> {
        // The CRL distribution points in the certificates name this address.
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(step("binding the CRL publisher"))?;
        let addr = listener
            .local_addr()
            .map_err(step("binding the CRL publisher"))?;
        let crl_base = format!("http://{addr}/crl");
        let pki = TestPki::init(
            &dir.join("pki"),
            TestPkiOptions {
                algorithm: alg,
                crl_base_url: Some(crl_base.clone()),
                ..TestPkiOptions::default()
            },
        )
        .map_err(step("creating the test PKI"))?;
        let issue = |name: &str| {
            pki.issue_card(&CardOptions {
                algorithm: alg,
                cardholder: name.to_string(),
                ..CardOptions::default()
            })
            .map_err(step(format!("issuing {name}'s card")))
        };
        let cards = DemoCards {
            ada: issue("Ada Lovelace")?,
            bob: issue("Bob Stranger")?,
            carol: issue("Carol Shaw")?,
            dan: issue("Dan Lab")?,
        };
        let now = Timestamp::now().to_zoned(TimeZone::UTC);
        let lab_day = (now.weekday().to_monday_zero_offset() as usize + 3) % 7;
        let line = Pty::open().map_err(DemoError::Line)?;
        let key = Key(random_key());
        let key_path = dir.join(DOOR_IO_KEY_FILE);
        files::write_hex_key(&key_path, &key.0)
            .map_err(step(format!("writing {}", key_path.display())))?;
        let (text, lab_schedule) = site_config(lab_day, Some(&line.slave_path));
        let path = dir.join(crate::config::CONFIG_FILE);
        std::fs::write(&path, text).map_err(step(format!("writing {}", path.display())))?;
        let mut config = Config::load(&path).map_err(step("loading the demo configuration"))?;
        if let Some(addr) = listen {
            if !addr.ip().is_loopback() {
                return Err(DemoError::NotLoopback(addr));
            }
            config.http.listen = addr;
        }
        config
            .check(&path)
            .map_err(step("checking the demo configuration"))?;
        let trust =
            crate::trust::load(&config).map_err(step("loading the test PKI as trust anchors"))?;
        let publisher = Arc::new(CrlPublisher::default());
        publisher.publish(&pki)?;
        Ok(DemoSite {
            pki,
            cards,
            config,
            enroller: crate::enroll::enrollment_authenticator(trust),
            lab_schedule,
            now,
            crl_base,
            publisher,
            listener: Some(listener),
            door_io: DoorIoLine { line, key },
        })
    }

    /// Starts the lab door's I/O module (pivgate's OSDP peripheral device)
    /// on the far side of the service's OSDP port, the door shut: input 0,
    /// the position switch (normally closed), reads 1. Change it with
    /// [`PdHandle::set_inputs`]; each change reaches the service in answer
    /// to its next poll.
    pub fn start_door_io(&self) -> Result<PdHandle, DemoError> {
        let mut pd = PeripheralDevice::new(PdConfig {
            address: DOOR_IO_ADDRESS,
            id: PdId {
                serial: u32::from(DOOR_IO_ADDRESS),
                ..PdId::default()
            },
            capabilities: vec![
                Capability {
                    function: capability::CONTACT_STATUS,
                    compliance: 1,
                    items: 1,
                },
                Capability {
                    function: capability::CHECK_CHARACTER,
                    compliance: 1,
                    items: 0,
                },
                Capability {
                    function: capability::COMMUNICATION_SECURITY,
                    compliance: 1,
                    items: 1,
                },
            ],
            scbk: Some(self.door_io.key.clone()),
            install_mode: false,
            require_secure: true,
        });
        pd.set_inputs(vec![1]);
        let port = self
            .door_io
            .line
            .master
            .try_clone()
            .map_err(DemoError::DoorIo)?;
        PdHandle::spawn(port, pd, Box::new(NoApp), Link::paced(DOOR_IO_BAUD))
            .map_err(DemoError::DoorIo)
    }

    /// Serves the publisher and starts the service with an admin and a
    /// viewer token (inside a tokio runtime).
    pub async fn start(&mut self) -> Result<Started, DemoError> {
        if let Some(l) = self.listener.take() {
            self.publisher.serve(l)?;
        }
        let service = Service::start(self.config.clone(), None)
            .await
            .map_err(step("starting the door service"))?;
        let store = service.loaded().store.clone();
        let admin_token = crate::token::create(&store, "demo-admin", Role::Admin)
            .await
            .map_err(step("creating the API token"))?;
        let viewer_token = crate::token::create(&store, "demo-viewer", Role::Viewer)
            .await
            .map_err(step("creating the viewer token"))?;
        Ok(Started {
            service,
            admin_token,
            viewer_token,
        })
    }

    /// Enrolls each `(cardholder, card, group)` after a full validation
    /// (PKI-CAK on the full path, the CHUID's signature and binding) of the
    /// card `card` reaches, then loads the enrollments into the running
    /// service.
    pub async fn enroll(
        &self,
        service: &Service,
        who: Vec<(&str, Box<dyn Transport + Send>, &str)>,
    ) -> Result<(), DemoError> {
        let store = service.loaded().store.clone();
        for (holder, mut card, group) in who {
            let validated = crate::enroll::validate_card(&self.enroller, &mut *card)
                .map_err(step(format!("validating {holder}'s card")))?;
            crate::enroll::register(
                &store,
                &validated,
                holder,
                Some(group),
                "pivgate-demo",
                Timestamp::now(),
            )
            .await
            .map_err(step(format!("enrolling {holder}")))?;
        }
        service
            .reload()
            .await
            .map_err(step("loading the enrollments"))
    }
}

/// Where the I/O module's secure channel key is kept, beside the
/// configuration.
const DOOR_IO_KEY_FILE: &str = "door-io.key";

fn random_key() -> [u8; 16] {
    let mut k = [0u8; 16];
    // aws-lc's generator only fails without any OS entropy source.
    aws_lc_rs::rand::fill(&mut k).expect("the system random generator is available");
    k
}

/// The demo site's `pivgate.toml` and the name of the lab's schedule: the
/// lab crew may use the lab on one day of the week only, `lab_day`
/// (0 = Monday; the demo picks a day that is not today, so it always taps
/// outside it); staff may use the front door and the server room at any
/// time. With `door_io`, the serial device of the lab door's OSDP I/O
/// module (its position switch on input 0).
pub fn site_config(lab_day: usize, door_io: Option<&Path>) -> (String, String) {
    const DAYS: [(&str, &str); 7] = [
        ("mon", "Mondays"),
        ("tue", "Tuesdays"),
        ("wed", "Wednesdays"),
        ("thu", "Thursdays"),
        ("fri", "Fridays"),
        ("sat", "Saturdays"),
        ("sun", "Sundays"),
    ];
    let (day, days) = DAYS[lab_day % 7];
    let lab_schedule = format!("{days} 08-18");
    let osdp = door_io.map_or_else(String::new, |device| {
        format!(
            r#"
# The lab door's position switch, on input 0 of an OSDP I/O module: opened
# without a grant or an unlock it is a forced alarm; open longer than
# held_open_ms after an allowed opening, a held-open alarm.
[[osdp.ports]]
device = "{}"
baud = {DOOR_IO_BAUD}

[[osdp.ports.io]]
address = {DOOR_IO_ADDRESS}
key_file = "{DOOR_IO_KEY_FILE}"
door = "{ALARM_DOOR}"

[osdp.ports.io.inputs]
contact = {{ input = 0 }}
held_open_ms = {HELD_OPEN_MS}
prealarm_ms = {PREALARM_MS}
"#,
            device.display()
        )
    });
    let text = format!(
        r#"# The demo site, written by `pivgate demo`.
data_dir = "data"

[http]
listen = "127.0.0.1:0"

[trust]
anchors = ["pki/root.pem"]
intermediates = ["pki/intermediate.pem"]
crls = ["pki/root.crl.pem", "pki/intermediate.crl.pem"]

# CRLs are also downloaded from the certificates' distribution points,
# which point at the demo's own CRL publisher on loopback.
[trust.fetch]

[seed.site]
name = "Demo site"
time_zone = "UTC"

[[seed.doors]]
name = "Front door"
mechanism = "pki-cak"

[[seed.doors]]
name = "Lab"
mechanism = "pki-cak"

[[seed.doors]]
name = "Server room"
mechanism = "pki-auth"

[[seed.schedules]]
name = "always"
windows = ["mon-sun 00:00-24:00"]

[[seed.schedules]]
name = "{lab_schedule}"
windows = ["{day} 08:00-18:00"]

[[seed.groups]]
name = "staff"
schedule = "always"
doors = ["Front door", "Server room"]

[[seed.groups]]
name = "lab crew"
schedule = "{lab_schedule}"
doors = ["Lab"]

[seed.readers]
"{FRONT}" = "Front door"
"{LAB}" = "Lab"
"{SERVER_ROOM}" = "Server room"
{osdp}"#
    );
    (text, lab_schedule)
}

/// The files served, in the order of [`CrlPublisher`]'s contents.
const PUBLISHED: [(&str, &str); 4] = [
    ("root.crl", "application/pkix-crl"),
    ("intermediate.crl", "application/pkix-crl"),
    ("root.p7c", "application/pkcs7-mime"),
    ("intermediate.p7c", "application/pkcs7-mime"),
];

/// The test PKI's publisher: what the certificates' CRL distribution points
/// and caIssuers URLs name, on loopback (`/crl/root.crl`,
/// `/crl/intermediate.crl`, `/crl/root.p7c`, `/crl/intermediate.p7c`).
#[derive(Default)]
pub struct CrlPublisher {
    files: RwLock<[Vec<u8>; 4]>,
}

impl CrlPublisher {
    /// Publishes `pki`'s current CRLs and CA certificates.
    pub fn publish(&self, pki: &TestPki) -> Result<(), DemoError> {
        let files = pki.publication_files().map_err(DemoError::Encode)?;
        let mut out: [Vec<u8>; 4] = Default::default();
        for (slot, (name, _)) in out.iter_mut().zip(PUBLISHED) {
            *slot = files
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, der)| der.clone())
                .ok_or(DemoError::Missing(name))?;
        }
        *self.files.write().unwrap_or_else(|p| p.into_inner()) = out;
        Ok(())
    }

    /// Serves the files on `listener` until the runtime stops (call inside
    /// a tokio runtime).
    pub fn serve(self: &Arc<Self>, listener: TcpListener) -> Result<(), DemoError> {
        use axum::{http::header, response::IntoResponse, routing::get, Router};
        listener.set_nonblocking(true).map_err(DemoError::Listen)?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(DemoError::Listen)?;
        let file = |i: usize, me: Arc<Self>| {
            move || async move {
                let der = me.files.read().unwrap_or_else(|p| p.into_inner())[i].clone();
                ([(header::CONTENT_TYPE, PUBLISHED[i].1)], der).into_response()
            }
        };
        let mut app = Router::new();
        for (i, (name, _)) in PUBLISHED.iter().enumerate() {
            app = app.route(&format!("/crl/{name}"), get(file(i, self.clone())));
        }
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("the demo's CRL publisher stopped: {e}");
            }
        });
        Ok(())
    }

    /// The issuer revokes `card`'s card-authentication certificate and
    /// publishes the new CRL (which a revocation refresh then downloads).
    pub fn revoke(&self, pki: &mut TestPki, card: &CardCredentials) -> Result<(), DemoError> {
        let cak = &card
            .slot(0x9E)
            .ok_or(DemoError::NoCardAuthentication)?
            .certificate;
        pki.revoke(cak, None).map_err(DemoError::Revoke)?;
        self.publish(pki)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_site_is_a_valid_configuration_with_the_lab_day_named() {
        let (text, schedule) = super::site_config(9, Some(std::path::Path::new("/dev/pts/99")));
        assert_eq!(schedule, "Wednesdays 08-18");
        assert!(text.contains("windows = [\"wed 08:00-18:00\"]"), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pivgate.toml");
        std::fs::write(&p, &text).unwrap();
        let c = crate::config::Config::load(&p).unwrap();
        let io = &c.osdp.ports[0].io[0];
        assert_eq!((io.door.as_str(), io.inputs.held_open_ms), ("Lab", 1500));
        assert_eq!(
            io.key_file.as_deref(),
            Some(dir.path().join("door-io.key").as_path())
        );
    }
}
