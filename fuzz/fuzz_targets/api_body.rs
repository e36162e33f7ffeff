//! Fuzzes the API's JSON request bodies: the first byte picks the entity
//! kind (or a door command), the rest is the body. Each entity body goes
//! through what `POST`, `PUT` and `PATCH` do with it before the store
//! (`server::http::entities::body_to_entity`), and an entity that was
//! created must come back unchanged when the body `GET` shows is sent back
//! with `PUT`. Nothing may panic.

#![no_main]

use access::jiff::Timestamp;
use libfuzzer_sys::fuzz_target;
use server::http::entities::body_to_entity;
use server::http::extract::{json_body, json_body_required};
use server::http::schema;

const KINDS: [&str; 8] = [
    "site",
    "door",
    "reader",
    "cardholder",
    "credential",
    "group",
    "schedule",
    "holiday",
];

fn without_version(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("version");
    }
    v
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let bytes = axum::body::Bytes::copy_from_slice(body);
    match pick % 11 {
        8 => {
            let _ = json_body_required::<schema::ModeCommand>(&bytes);
        }
        9 => {
            let _ = json_body::<schema::UnlockCommand>(&bytes);
        }
        10 => {
            let _ = json_body::<schema::KeypadEntry>(&bytes);
        }
        k => {
            let kind = KINDS[usize::from(k)];
            let now = Timestamp::from_second(1_780_000_000).expect("a valid instant");
            let steps = body_to_entity(kind, body, now).expect("a known kind");
            if let Ok(created) = steps.create {
                let back = steps
                    .round_trip
                    .expect("a created entity is sent back")
                    .unwrap_or_else(|e| {
                        panic!("{kind} {created} as shown is refused as a body: {e:?}")
                    });
                assert_eq!(
                    without_version(back),
                    without_version(created),
                    "{kind}: sent back as shown, the entity changed"
                );
            }
        }
    }
});
