//! What goes over the link when a site uploads its events: version 1.
//!
//! `POST /sync/v1/events` with an [`UploadBatch`] as JSON; the central
//! answers `200` with an [`UploadAck`], or an error status with a
//! [`Refusal`] (`{"code": …, "reason": …}`). The site is the one the
//! link authenticated (its certificate), never a field of the batch.
//!
//! ```json
//! {"v": 1, "floor": 0, "sent_at": "2026-11-26T18:00:00.5Z",
//!  "events": [{"seq": 1, "time": "2026-11-26T17:59:59Z", "kind": "tap", "door": 1, …}]}
//! {"v": 1, "acked": 1, "stored": 1, "duplicates": 0, "late": 0, "skew_us": 412, "skewed": false}
//! ```
//!
//! Each event is the API's event object with `seq` (the site's sequence,
//! its event id there) in place of `id`. The acknowledgement `acked` is the
//! highest sequence up to which the central holds every event of the site;
//! the site sends again everything above it.

use access::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use store::SiteEvent;

/// The version this release speaks (the `v` of both messages and of the
/// path).
pub const VERSION: u32 = 1;

/// Where the central takes batches.
pub const EVENTS_PATH: &str = "/sync/v1/events";

/// The most events one batch may carry.
pub const MAX_EVENTS: usize = 1024;

/// The largest request body the central reads (a batch of taps, each with
/// its whole transaction).
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// A batch of a site's events, by sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadBatch {
    /// [`VERSION`].
    pub v: u32,
    /// Every sequence at or below this is either acknowledged or will never
    /// be sent (pruned at the site before it first uploaded).
    pub floor: i64,
    /// The site's clock when it sent the batch (the central compares it
    /// with its own).
    pub sent_at: Timestamp,
    pub events: Vec<SiteEvent>,
}

/// The central's answer to a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadAck {
    /// [`VERSION`].
    pub v: u32,
    /// Every event of the site up to this sequence is stored at the central.
    pub acked: i64,
    /// Events of the batch stored now.
    pub stored: u64,
    /// Events of the batch the central already held.
    pub duplicates: u64,
    /// Events stored now and marked late.
    pub late: u64,
    /// The site's clock minus the central's, in microseconds, as the batch
    /// showed it (`sent_at` against the central's clock on receipt).
    pub skew_us: i64,
    /// Whether that is beyond what the central allows.
    pub skewed: bool,
}

impl UploadAck {
    pub fn from_store(ack: &store::Ack) -> Self {
        UploadAck {
            v: VERSION,
            acked: ack.acked,
            stored: ack.stored,
            duplicates: ack.duplicates,
            late: ack.late,
            skew_us: i64::try_from(ack.skew.as_micros()).unwrap_or(if ack.skew.is_negative() {
                i64::MIN
            } else {
                i64::MAX
            }),
            skewed: ack.skewed,
        }
    }
}

/// Why the central refused a batch: a stable code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    pub code: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_back_as_written() {
        let text = r#"{"v":1,"floor":3,"sent_at":"2026-11-26T18:00:00.5Z","events":[
            {"seq":4,"time":"2026-11-26T17:59:59Z","kind":"tap","door":1,"reader":1,
             "cardholder":null,"credential":null,"result":"refused","code":"not-enrolled",
             "reason":"the card is not enrolled","actor":null,"data":{"stages":[]}}]}"#;
        let b: UploadBatch = serde_json::from_str(text).unwrap();
        assert_eq!(
            (b.v, b.floor, b.events.len(), b.events[0].seq),
            (1, 3, 1, 4)
        );
        assert_eq!(b.events[0].event.code.as_deref(), Some("not-enrolled"));
        let again: UploadBatch = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        assert_eq!(again, b);
    }
}
