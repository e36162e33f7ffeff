//! In-process helpers shared by the service tests that issue their own
//! cards: a card and its card authentication certificate, a tap at the
//! front door, a cardholder in `staff`, an API token.

#![allow(dead_code)]

use access::jiff::Timestamp;
use access::{Cardholder, CardholderId, CardholderStatus, ReaderId};
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki};
use server::service::Service;
use store::{ApiToken, Role};

/// The front door's reader in the configuration `init_template` writes.
pub const FRONT: ReaderId = ReaderId(1);

/// A card for `name` from `pki`.
pub fn card(pki: &TestPki, name: &str) -> CardCredentials {
    pki.issue_card(&CardOptions {
        cardholder: name.into(),
        ..CardOptions::default()
    })
    .unwrap()
}

/// The card authentication certificate (9E) of `c`.
pub fn cak(c: &CardCredentials) -> Vec<u8> {
    c.slot(0x9E).unwrap().certificate.clone()
}

/// Taps `c` at the front door; returns the code and the sentence.
pub async fn tap(s: &Service, c: &CardCredentials) -> (String, Option<String>) {
    let controller = s.loaded().controller.clone();
    let image = c.card_image(Some(7)).unwrap();
    tokio::task::spawn_blocking(move || {
        let mut t = InProcess::new(Card::new(image));
        let r = controller.tap(&mut t, FRONT, None, None).unwrap();
        (r.code().to_string(), r.reason())
    })
    .await
    .unwrap()
}

/// A new active cardholder in group `staff` (both doors, always).
pub async fn staff_member(s: &Service, name: &str) -> CardholderId {
    let store = &s.loaded().store;
    let h = store
        .create(Cardholder {
            id: CardholderId(0),
            name: name.into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        })
        .await
        .unwrap();
    let mut staff = store
        .list::<access::AccessGroup>()
        .await
        .unwrap()
        .into_iter()
        .find(|g| g.name == "staff")
        .unwrap();
    staff.cardholders.push(h.id);
    store.update(&staff).await.unwrap();
    h.id
}

/// Creates the API token `name` with `role` and `secret` unless a token of
/// that name exists.
pub async fn ensure_token(s: &Service, name: &str, role: Role, secret: &str) {
    let store = &s.loaded().store;
    if store
        .list_tokens()
        .await
        .unwrap()
        .iter()
        .any(|t| t.name == name)
    {
        return;
    }
    store
        .create_token(&ApiToken::new(
            name,
            role,
            server::token::hash(secret),
            Timestamp::now(),
        ))
        .await
        .unwrap();
}
