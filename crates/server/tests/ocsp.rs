//! OCSP in the service: `openssl ocsp` (installed by scripts/setup.sh) answers for the test
//! PKI's issuing CA on loopback; the service asks it when a card is enrolled and in the
//! background, and the doors decide from the answers held, also once the responder is gone.

use std::process::Command;

mod responder;
mod staff;
use responder::responder;
use staff::{cak, card, ensure_token, staff_member, tap};

use access::CardholderId;
use pki::ocsp::client::OcspConfig;
use pki::trust::RevocationSourceConfig;
use pki_issue::{pem_encode, TestPki, TestPkiOptions};
use server::config::{init_template, Config};
use server::service::Service;
use store::Role;

const READER: &str = "pivgate ocsp test reader";
const TOKEN: &str = "ocsp-test-admin-token";

async fn holder(s: &Service, name: &str) -> CardholderId {
    let h = staff_member(s, name).await;
    ensure_token(s, "test-admin", Role::Admin, TOKEN).await;
    h
}

async fn enroll(s: &Service, holder: CardholderId, cert: &[u8]) -> (u16, String) {
    let url = format!("{}/api/v1/credentials/enroll", s.url());
    let body = serde_json::json!({
        "cardholder": holder.0,
        "certificate": pem_encode("CERTIFICATE", cert),
    });
    tokio::task::spawn_blocking(move || {
        let r = ureq::post(&url)
            .set("Authorization", &format!("Bearer {TOKEN}"))
            .set("Content-Type", "application/json")
            .send_string(&body.to_string());
        let resp = match r {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        (resp.status(), resp.into_string().unwrap())
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doors_decide_from_ocsp_answers_asked_in_the_background() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
    let alice = card(&pki, "Alice");
    let mallory = card(&pki, "Mallory");
    let (responder, url) = responder(dir.path(), &pki, &[&cak(&alice)], &[&cak(&mallory)]);

    // The issuing CA's CRL is not configured: the cards' status can only come from OCSP
    // (the root's CRL still covers the issuing CA, as `either` allows).
    let text = init_template(READER, "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut config = Config::load(&path).unwrap();
    let t = config.trust.as_mut().unwrap();
    t.crls.retain(|p| p.ends_with("root.crl.pem"));
    t.revocation.source = RevocationSourceConfig::Either;
    // Without [trust.ocsp] nothing would ever ask: the configuration says so.
    assert!(config.check(&path).is_err());
    config.trust.as_mut().unwrap().ocsp = Some(OcspConfig {
        responder_url: Some(url),
        ..OcspConfig::default()
    });
    config.check(&path).unwrap();

    let s = Service::start(config, None).await.unwrap();
    let l = s.loaded();
    let alice_id = holder(&s, "Alice").await;
    let (status, body) = enroll(&s, alice_id, &cak(&alice)).await;
    assert_eq!(status, 201, "{body}");
    assert!(l.revocation.ocsp_answers() >= 1);
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");

    // The responder says Mallory's certificate is revoked: not enrolled.
    let mallory_id = holder(&s, "Mallory").await;
    let (status, body) = enroll(&s, mallory_id, &cak(&mallory)).await;
    assert_ne!(status, 201, "{body}");
    assert!(body.contains("revoked"), "{body}");

    // The background refresh asks again; with the responder gone it fails, the answers held
    // stay, and the doors keep deciding from them without waiting on the network.
    // (The responder, configured for every certificate, cannot answer for the issuing CA
    // itself: that request fails each time, and the root's CRL covers the CA.)
    let before = l.revocation.refresh_ocsp_now().await.unwrap();
    drop(responder);
    let after = l.revocation.refresh_ocsp_now().await.unwrap();
    assert!(after > before, "{before} then {after} failed requests");
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    s.shutdown().await.unwrap();
}

/// The answers the service got are kept on disk: after a restart with the responder gone,
/// the doors decide from them at once (the issuing CA's CRL is not configured, so without
/// them every tap would be refused for want of revocation data).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocsp_answers_survive_a_restart() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
    let alice = card(&pki, "Alice");
    let mallory = card(&pki, "Mallory");
    let (responder, url) = responder(dir.path(), &pki, &[&cak(&alice)], &[&cak(&mallory)]);

    let text = init_template(READER, "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut config = Config::load(&path).unwrap();
    let t = config.trust.as_mut().unwrap();
    t.crls.retain(|p| p.ends_with("root.crl.pem"));
    t.revocation.source = RevocationSourceConfig::Either;
    t.ocsp = Some(OcspConfig {
        responder_url: Some(url),
        ..OcspConfig::default()
    });
    config.check(&path).unwrap();

    let s = Service::start(config.clone(), None).await.unwrap();
    let alice_id = holder(&s, "Alice").await;
    let (status, body) = enroll(&s, alice_id, &cak(&alice)).await;
    assert_eq!(status, 201, "{body}");
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    s.shutdown().await.unwrap();
    let kept = std::fs::read_dir(config.data_dir.join("ocsp"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "der")
        })
        .count();
    assert!(kept >= 1, "no answer kept on disk");

    drop(responder);
    let s = Service::start(config, None).await.unwrap();
    let l = s.loaded();
    assert!(l.revocation.ocsp_answers() >= 1);
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    s.shutdown().await.unwrap();
}
