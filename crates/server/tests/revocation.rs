//! Revocation kept current, with the service in-process, a test PKI whose
//! certificates name a CRL distribution point on a tiny HTTP server run by
//! the test, and in-process software cards: a card is granted, revoked by
//! its issuer, refused after a refresh, still refused after a restart with
//! the CRL server gone (the CRLs kept on disk), suspended by re-validation;
//! stale CRLs are refused or accepted as the policy says; and the API
//! enrolls from a certificate PEM only what validates.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

mod staff;
use staff::{cak, card, ensure_token, staff_member, tap};

use access::jiff::Timestamp;
use access::{Cardholder, CardholderId, CardholderStatus, CredentialState};
use pki::fetch::FetchConfig;
use pki_issue::{pem_encode, CrlBuilder, TestPki, TestPkiOptions};
use server::config::{init_template, Config, StalePolicy};
use server::service::Service;
use store::{EventKind, EventQuery, Role};

const READER: &str = "pivgate revocation test reader";
const TOKEN: &str = "revocation-test-admin-token";
const VIEWER: &str = "revocation-test-viewer-token";

/// Path → body.
type Routes = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// Serves CRLs by path until stopped.
struct CrlServer {
    base: String,
    routes: Routes,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CrlServer {
    fn start() -> CrlServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let routes: Routes = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (routes.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { break };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let body = r
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, b)| b.clone());
                match body {
                    Some(b) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            b.len()
                        );
                        let _ = stream.write_all(&b);
                    }
                    None => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                    }
                }
            }
        });
        CrlServer {
            base: format!("http://{addr}/crl"),
            routes,
            stop,
            addr,
            thread: Some(thread),
        }
    }

    /// Serves the PKI's current CRLs.
    fn publish(&self, pki: &TestPki) {
        self.set("/crl/root.crl", pki.root_crl_der().to_vec());
        self.set("/crl/intermediate.crl", pki.intermediate_crl_der().to_vec());
    }

    fn set(&self, path: &str, body: Vec<u8>) {
        let mut r = self.routes.lock().unwrap();
        r.retain(|(p, _)| p != path);
        r.push((path.to_string(), body));
    }

    /// Stops answering: the port is closed.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for CrlServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A PKI whose certificates point at `server`, written under `dir/pki`.
fn pki(dir: &Path, server: &CrlServer) -> TestPki {
    TestPki::init(
        &dir.join("pki"),
        TestPkiOptions {
            crl_base_url: Some(server.base.clone()),
            ..TestPkiOptions::default()
        },
    )
    .unwrap()
}

/// The init template on `dir`, trusting the test PKI, CRLs only from
/// downloads.
fn config(dir: &Path, stale: Option<(StalePolicy, Option<u64>)>) -> Config {
    let text = init_template(READER, "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    let t = c.trust.as_mut().unwrap();
    t.crls.clear();
    t.fetch = Some(FetchConfig::default());
    if let Some((policy, hours)) = stale {
        c.revocation.stale = Some(policy);
        c.revocation.stale_grace_hours = hours;
    }
    c.check(&path).unwrap();
    c
}

/// A cardholder in group `staff` (both doors, always) and an admin and a
/// viewer token.
async fn prepare(s: &Service, name: &str) -> CardholderId {
    let h = staff_member(s, name).await;
    ensure_token(s, "test-admin", Role::Admin, TOKEN).await;
    ensure_token(s, "test-viewer", Role::Viewer, VIEWER).await;
    h
}

/// The next event with `code` published on the live channel (events are
/// published just after their commit is acknowledged).
async fn published(
    live: &mut tokio::sync::broadcast::Receiver<Arc<store::Event>>,
    code: &str,
) -> Arc<store::Event> {
    loop {
        match tokio::time::timeout(std::time::Duration::from_secs(10), live.recv()).await {
            Ok(Ok(e)) if e.event.code.as_deref() == Some(code) => return e,
            Ok(Ok(_)) => continue,
            other => panic!("no `{code}` event published: {other:?}"),
        }
    }
}

/// `POST /api/v1/credentials/enroll`: status and JSON answer.
async fn enroll(s: &Service, body: serde_json::Value) -> (u16, serde_json::Value) {
    enroll_as(s, TOKEN, body).await
}

async fn enroll_as(s: &Service, token: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let url = format!("{}/api/v1/credentials/enroll", s.url());
    let auth = format!("Bearer {token}");
    tokio::task::spawn_blocking(move || {
        let r = ureq::post(&url)
            .set("Authorization", &auth)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string());
        let resp = match r {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        let status = resp.status();
        let text = resp.into_string().unwrap();
        (status, serde_json::from_str(&text).unwrap())
    })
    .await
    .unwrap()
}

async fn admin_codes(s: &Service) -> Vec<(String, String, String)> {
    let page = s
        .loaded()
        .store
        .query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    page.events
        .into_iter()
        .map(|e| {
            (
                e.event.code.unwrap_or_default(),
                e.event.actor.unwrap_or_default(),
                e.event.reason.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_is_refreshed_kept_on_disk_and_acted_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut crl_server = CrlServer::start();
    let mut pki = pki(dir.path(), &crl_server);
    crl_server.publish(&pki);
    let alice = card(&pki, "Alice");
    let s = Service::start(config(dir.path(), None), None)
        .await
        .unwrap();
    let l = s.loaded();
    assert!(l.revocation.downloads());
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 0);
    let holder = prepare(&s, "Alice").await;
    // Enrollment and re-validation events are published live like taps.
    let mut live = l.controller.log().subscribe();

    // Enrollment is for admins.
    let good = serde_json::json!({
        "cardholder": holder.0,
        "certificate": pem_encode("CERTIFICATE", &cak(&alice)),
    });
    let (status, body) = enroll_as(&s, VIEWER, good.clone()).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = enroll(
        &s,
        serde_json::json!({ "cardholder": 999, "certificate": good["certificate"] }),
    )
    .await;
    assert_eq!(status, 404);

    // The API refuses what is not a valid certificate, naming the field or
    // the refusal.
    let (status, body) = enroll(
        &s,
        serde_json::json!({ "cardholder": holder.0, "certificate": "not a PEM" }),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "certificate", "{body}");
    let (status, body) = enroll(
        &s,
        serde_json::json!({ "cardholder": holder.0, "certificat": "x" }),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "certificat", "{body}");
    let stranger = TestPki::generate(TestPkiOptions {
        organization: "Another issuer".into(),
        ..TestPkiOptions::default()
    })
    .unwrap();
    let foreign = card(&stranger, "Mallory");
    let (status, body) = enroll(
        &s,
        serde_json::json!({
            "cardholder": holder.0,
            "certificate": pem_encode("CERTIFICATE", &cak(&foreign)),
        }),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["code"], "no-path-to-anchor", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("no path"),
        "{body}"
    );
    assert_eq!(tap(&s, &foreign).await.0, "no-path-to-anchor");

    // A good PEM: enrolled with its identifiers, granted at once.
    let (status, body) = enroll(
        &s,
        serde_json::json!({
            "cardholder": holder.0,
            "certificate": pem_encode("CERTIFICATE", &cak(&alice)),
        }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let created = published(&mut live, "credential.create").await;
    assert_eq!(created.event.actor.as_deref(), Some("test-admin"));
    assert_eq!(created.event.cardholder, Some(holder));
    assert!(created.event.credential.is_some());
    assert_eq!(
        body["credential"]["card_uuid"],
        access::CardUuid(alice.uuid).to_string(),
        "{body}"
    );
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    let (status, body) = enroll(
        &s,
        serde_json::json!({
            "cardholder": holder.0,
            "certificate": pem_encode("CERTIFICATE", &cak(&alice)),
        }),
    )
    .await;
    assert_eq!(status, 409, "{body}");
    let events = admin_codes(&s).await;
    assert!(
        events
            .iter()
            .any(|(c, a, _)| c == "credential.create" && a == "test-admin"),
        "{events:?}"
    );
    // Both distribution points are watched and their CRLs kept on disk.
    let status: Vec<String> = l
        .revocation
        .crl_status()
        .into_iter()
        .map(|c| c.url)
        .collect();
    assert_eq!(
        status,
        [
            format!("{}/intermediate.crl", crl_server.base),
            format!("{}/root.crl", crl_server.base)
        ]
    );
    let on_disk = || {
        std::fs::read_dir(dir.path().join("pivgate-data/crls"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "crl")
            })
            .count()
    };
    assert_eq!(on_disk(), 2);

    // The issuer revokes the card: refused after the next refresh.
    let before_revocation = pki.intermediate_crl_der().to_vec();
    pki.revoke(&cak(&alice), None).unwrap();
    crl_server.publish(&pki);
    assert_eq!(tap(&s, &alice).await.0, "granted");
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 0);
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "certificate-revoked", "{reason:?}");

    // The CRL from before the revocation, served again (a replay), is
    // refused and the newer copy stays; so is a CRL no trusted CA signed.
    let current = pki.intermediate_crl_der().to_vec();
    crl_server.set("/crl/intermediate.crl", before_revocation);
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 1);
    assert_eq!(tap(&s, &alice).await.0, "certificate-revoked");
    let mut forger = TestPki::generate(TestPkiOptions::default()).unwrap();
    let f = card(&forger, "Forger");
    forger.revoke(&cak(&f), None).unwrap();
    crl_server.set(
        "/crl/intermediate.crl",
        forger.intermediate_crl_der().to_vec(),
    );
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 1);
    assert_eq!(tap(&s, &alice).await.0, "certificate-revoked");
    let refused: Vec<String> = admin_codes(&s)
        .await
        .into_iter()
        .filter(|(c, _, _)| c == "crl.refresh-failed")
        .map(|(_, _, why)| why)
        .collect();
    assert!(
        refused
            .iter()
            .any(|w| w.contains("older than the copy held")),
        "{refused:?}"
    );
    crl_server.set("/crl/intermediate.crl", current);
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 0);

    // Re-validation marks the credential revoked, with an event saying why.
    let report = l.revocation.revalidate().await.unwrap();
    assert_eq!((report.checked, report.ok, report.revoked), (1, 0, 1));
    assert_eq!(report.suspended(), 1);
    assert_eq!(l.revocation.report(), report);
    assert_eq!(
        published(&mut live, "credential.revoke")
            .await
            .event
            .actor
            .as_deref(),
        Some("pivgate")
    );
    let credential = l
        .store
        .list::<access::Credential>()
        .await
        .unwrap()
        .remove(0);
    assert!(
        matches!(credential.state, CredentialState::Revoked { .. }),
        "{:?}",
        credential.state
    );
    let snapshot_state = l
        .controller
        .snapshot()
        .credential(credential.id)
        .map(|c| c.state.clone());
    assert_eq!(snapshot_state, Some(credential.state.clone()));
    let events = admin_codes(&s).await;
    let (_, actor, why) = events
        .iter()
        .find(|(c, _, _)| c == "credential.revoke")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(actor, "pivgate");
    assert!(why.contains("revoked"), "{why}");
    // A second run finds nothing active to change.
    let again = l.revocation.revalidate().await.unwrap();
    assert_eq!((again.checked, again.revoked), (0, 0));
    s.shutdown().await.unwrap();

    // Restart with the CRL server gone: the CRLs kept on disk still refuse
    // the card, and a damaged file among them is skipped.
    crl_server.stop();
    let crls = dir.path().join("pivgate-data/crls");
    std::fs::write(crls.join("damaged.crl"), b"not a CRL").unwrap();
    std::fs::write(crls.join("damaged.meta"), "http://127.0.0.1:1/x.crl\n0\n").unwrap();
    let s = Service::start(config(dir.path(), None), None)
        .await
        .unwrap();
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "certificate-revoked", "{reason:?}");
    // A refresh failure is recorded once per distribution point, not per retry.
    let l = s.loaded();
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 2);
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 2);
    let failures: Vec<_> = admin_codes(&s)
        .await
        .into_iter()
        .filter(|(c, _, w)| c == "crl.refresh-failed" && w.contains("Connection"))
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures.iter().all(|(_, a, _)| a == "pivgate"));
    assert!(l.revocation.crl_status().iter().all(|c| c.error.is_some()));
    assert_eq!(tap(&s, &alice).await.0, "certificate-revoked");
    s.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_revocation_data_is_refused_or_accepted_by_policy() {
    let dir = tempfile::tempdir().unwrap();
    let crl_server = CrlServer::start();
    let pki = pki(dir.path(), &crl_server);
    crl_server.publish(&pki);
    let bob = card(&pki, "Bob");
    let s = Service::start(config(dir.path(), None), None)
        .await
        .unwrap();
    let l = s.loaded();
    // The issuer's current CRL was issued two hours ago: downloaded now,
    // the revocation data is as of the download, not of its thisUpdate.
    let now = pki_issue::now();
    let two_hours = CrlBuilder::new()
        .update_times(now - 7_200, Some(now + 86_400))
        .crl_number(5)
        .sign(pki.intermediate_der(), pki.intermediate_key())
        .unwrap();
    crl_server.set("/crl/intermediate.crl", two_hours);
    l.revocation.refresh_now().await.unwrap();
    match l.controller.freshness().revocation {
        access::AsOf::At { at } => {
            let age = access::jiff::Timestamp::now().as_second() - at.as_second();
            assert!((0..600).contains(&age), "{age}");
        }
        other => panic!("{other:?}"),
    }
    let holder = prepare(&s, "Bob").await;
    let (status, body) = enroll(
        &s,
        serde_json::json!({
            "cardholder": holder.0,
            "certificate": pem_encode("CERTIFICATE", &cak(&bob)),
        }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(tap(&s, &bob).await.0, "granted");

    // The issuer's server now hands out a CRL past its nextUpdate (an hour
    // and a half ago), and no newer one.
    let now = pki_issue::now();
    let stale = CrlBuilder::new()
        .update_times(now - 86_400, Some(now - 5_400))
        .crl_number(10)
        .sign(pki.intermediate_der(), pki.intermediate_key())
        .unwrap();
    crl_server.set("/crl/intermediate.crl", stale);
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 0);
    let (code, reason) = tap(&s, &bob).await;
    assert_eq!(code, "revocation-stale", "{reason:?}");
    let reason = reason.unwrap();
    assert!(reason.contains("Test PIV Issuing CA"), "{reason}");
    assert!(reason.contains(", 1 h 3"), "{reason}");
    assert!(reason.contains("before the validation time"), "{reason}");
    s.shutdown().await.unwrap();

    // Explicitly "refuse": the same.
    let s = Service::start(config(dir.path(), Some((StalePolicy::Refuse, None))), None)
        .await
        .unwrap();
    assert_eq!(tap(&s, &bob).await.0, "revocation-stale");
    s.shutdown().await.unwrap();

    // A 24-hour grace period accepts it.
    let s = Service::start(
        config(dir.path(), Some((StalePolicy::Grace, Some(24)))),
        None,
    )
    .await
    .unwrap();
    let (code, reason) = tap(&s, &bob).await;
    assert_eq!(code, "granted", "{reason:?}");
    s.shutdown().await.unwrap();
}

#[test]
fn stale_policy_keys_are_checked() {
    let parse = |extra: &str| {
        let text = format!("[trust]\nanchors = [\"a.pem\"]\n{extra}");
        let c = Config::parse(&text, Path::new("t.toml"))?;
        c.check(Path::new("t.toml"))?;
        Ok::<_, server::config::ConfigError>(c)
    };
    let c = parse("[revocation]\nstale = \"grace\"\nstale_grace_hours = 24\n").unwrap();
    assert_eq!(
        c.revocation_policy().grace,
        std::time::Duration::from_secs(86_400)
    );
    let c = parse("[revocation]\nstale = \"refuse\"\n").unwrap();
    assert_eq!(c.revocation_policy().grace, std::time::Duration::ZERO);
    let c = parse("[trust.revocation]\ngrace_secs = 60\n").unwrap();
    assert_eq!(
        c.revocation_policy().grace,
        std::time::Duration::from_secs(60)
    );
    for (extra, key) in [
        (
            "[revocation]\nstale = \"grace\"\n",
            "revocation.stale_grace_hours",
        ),
        (
            "[revocation]\nstale = \"refuse\"\nstale_grace_hours = 2\n",
            "revocation.stale_grace_hours",
        ),
        (
            "[revocation]\nstale = \"grace\"\nstale_grace_hours = 0\n",
            "revocation.stale_grace_hours",
        ),
        (
            "[trust.revocation]\ngrace_secs = 60\n[revocation]\nstale = \"refuse\"\n",
            "trust.revocation.grace_secs",
        ),
        ("[revocation]\nstale = \"sometimes\"\n", "revocation.stale"),
        ("[revocation]\nrefresh_at = 1.5\n", "revocation.refresh_at"),
        (
            "[revocation]\nmin_refresh_secs = 0\n",
            "revocation.min_refresh_secs",
        ),
        (
            "[revocation]\nrevalidate_hours = 48\n",
            "revocation.revalidate_hours",
        ),
        ("[revocation]\nrefresh = true\n", "revocation.refresh"),
    ] {
        let e = parse(extra).unwrap_err();
        assert_eq!(e.key(), Some(key), "{extra}: {e}");
    }
}

/// Re-validation at a time past the certificate's notAfter: the credential
/// is suspended, with an event by `pivgate`, and the controller's snapshot
/// follows; a credential without a stored certificate is only counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revalidation_suspends_an_expired_credential() {
    use access::{Credential, CredentialId};
    use server::door::{Controller, SimulatedOutput};
    use server::revocation::Revocation;
    use store::Store;

    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let carol = card(&pki, "Carol");
    let store: Store = Store::open_data_dir(dir.path()).await.unwrap();
    let holder = store
        .create(Cardholder {
            id: CardholderId(0),
            name: "Carol".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        })
        .await
        .unwrap();
    let digest = |der: &[u8]| {
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
        access::Sha256::from_slice(d.as_ref()).unwrap()
    };
    let credential = |n: u8, der: &[u8]| Credential {
        id: CredentialId(0),
        cardholder: holder.id,
        card_uuid: Some(access::CardUuid([n; 16])),
        fasc_n: None,
        cert_sha256: Some(digest(der)),
        spki_sha256: None,
        expires_at: None,
        enrolled_at: Timestamp::now(),
        enrolled_by: "test".into(),
        state: CredentialState::Active,
    };
    let with = store
        .create_credential_with_certificate(credential(1, &cak(&carol)), &cak(&carol))
        .await
        .unwrap();
    let other = card(&pki, "Carol");
    store.create(credential(2, &cak(&other))).await.unwrap();
    // A credential edited to another card since enrollment: the certificate
    // kept from enrollment is not its own, so it is not judged by it.
    let third = card(&pki, "Carol");
    let edited = store
        .create_credential_with_certificate(credential(3, &cak(&third)), &cak(&carol))
        .await
        .unwrap();
    let authenticator = Arc::new(auth::Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        auth::Settings::default(),
    ));
    let (log, _writer) = store::EventLog::start(store.clone(), 0);
    let controller = Arc::new(Controller::new(
        authenticator,
        store.load_snapshot().await.unwrap(),
        log,
        Arc::new(SimulatedOutput::new()),
        tokio::runtime::Handle::current(),
        std::time::Duration::from_secs(1),
    ));
    let access = Arc::new(server::admin::AccessData::new(
        store.clone(),
        controller.clone(),
    ));
    let revocation = |at: Timestamp| {
        Revocation::new(
            dir.path(),
            Arc::new(pki.crl_set().unwrap()),
            None,
            Vec::new(),
            Default::default(),
            Default::default(),
            controller.clone(),
            access.clone(),
        )
        .with_clock(Arc::new(move || at))
    };

    // Today: valid.
    let report = revocation(Timestamp::now()).revalidate().await.unwrap();
    assert_eq!(
        (
            report.checked,
            report.ok,
            report.without_certificate,
            report.unknown
        ),
        (1, 1, 1, 1)
    );
    // Six years on the certificate has expired.
    let later = Timestamp::now() + access::jiff::SignedDuration::from_hours(6 * 365 * 24);
    let r = revocation(later);
    let report = r.revalidate().await.unwrap();
    assert_eq!((report.checked, report.expired, report.ok), (1, 1, 0));
    assert_eq!(
        store.get(edited.id).await.unwrap().state,
        CredentialState::Active
    );
    assert_eq!(report.last_run, Some(later));
    let state = store.get(with.id).await.unwrap().state;
    match &state {
        CredentialState::Suspended { reason } => assert!(reason.contains("expired"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        controller.snapshot().credential(with.id).unwrap().state,
        state
    );
    let page = store
        .query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let e = &page.events[0].event;
    assert_eq!(e.code.as_deref(), Some("credential.suspend"));
    assert_eq!(e.actor.as_deref(), Some("pivgate"));
    assert_eq!(e.credential, Some(with.id));
    // The report is kept for the next start.
    assert_eq!(revocation(Timestamp::now()).report(), report);
}
