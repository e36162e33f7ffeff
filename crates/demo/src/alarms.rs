//! The demo's door-alarm section: the lab door's position switch, reported
//! by its OSDP I/O module (pivgate's own peripheral device, secure
//! channel, on a pseudo-terminal the service serves as its OSDP port).
//! The door is forced open; the demo acknowledges the alarm through the
//! API with a note, and the alarm clears when the door closes. Then an
//! operator unlocks the door through the API, it opens and is left open:
//! past its allowed time, a held-open alarm, still active when the demo
//! ends (acknowledge it in the dashboard's Alarms page with `--serve`).
//!
//! Every step waits for the service's own event, with a deadline.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use access::jiff::{tz::TimeZone, Timestamp};
use access::DoorId;
use anyhow::{anyhow, bail, Context, Result};
use links::serial::PdHandle;
use server::demo::{DemoSite, ALARM_DOOR, HELD_OPEN_MS, PREALARM_MS};
use server::service::Service;
use store::{Event, EventKind};
use tokio::sync::broadcast::{error::RecvError, Receiver};

/// A bound on every wait, not a timing.
const PATIENCE: Duration = Duration::from_secs(20);

/// The note the demo acknowledges the forced alarm with.
pub const NOTE: &str = "checked on camera: a contractor, door closed again";

/// One alarm as the section shows it.
pub struct AlarmRow {
    pub kind: String,
    pub door: String,
    pub raised: Timestamp,
    /// When, by whom, with which note.
    pub acknowledged: Option<(Timestamp, String, String)>,
    pub cleared: Option<Timestamp>,
    /// What is still going on at the end.
    pub now: String,
}

/// What the section did; `io` keeps the lab door's I/O module running
/// (with `--serve`, the door stays open and its alarm active).
pub struct Alarms {
    pub rows: Vec<AlarmRow>,
    pub io: PdHandle,
}

/// The events of the service, waited on one by one.
struct Feed<'a> {
    rt: &'a tokio::runtime::Runtime,
    rx: Receiver<Arc<Event>>,
    door: DoorId,
}

impl Feed<'_> {
    fn wait(&mut self, what: &str, pred: impl Fn(&Event) -> bool) -> Result<Event> {
        let door = self.door;
        let rx = &mut self.rx;
        self.rt.block_on(async {
            tokio::time::timeout(PATIENCE, async {
                loop {
                    match rx.recv().await {
                        Ok(e) if e.event.door == Some(door) && pred(&e) => return Ok((*e).clone()),
                        Ok(_) | Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => bail!("the event feed ended"),
                    }
                }
            })
            .await
            .map_err(|_| anyhow!("no `{what}` event at {ALARM_DOOR} within {PATIENCE:?}"))?
        })
    }

    fn door_event(&mut self, code: &str) -> Result<Event> {
        self.wait(code, |e| {
            e.event.kind == EventKind::Door && e.event.code.as_deref() == Some(code)
        })
    }

    fn alarm_event(&mut self, code: &str, state: &str) -> Result<Event> {
        self.wait(&format!("{code} {state}"), |e| {
            e.event.kind == EventKind::Alarm
                && e.event.code.as_deref() == Some(code)
                && e.event.data.as_ref().is_some_and(|d| d["state"] == state)
        })
    }
}

/// `POST`s `body` to the service's API with `token`.
fn post(url: &str, token: &str, body: serde_json::Value) -> Result<serde_json::Value> {
    match ureq::post(url)
        .set("Authorization", &format!("Bearer {token}"))
        .timeout(PATIENCE)
        .send_json(body)
    {
        Ok(r) => r
            .into_json()
            .with_context(|| format!("reading the answer of {url}")),
        Err(ureq::Error::Status(code, r)) => {
            let text = r.into_string().unwrap_or_default();
            bail!("POST {url}: {code} {text}")
        }
        Err(e) => Err(e).with_context(|| format!("POST {url}")),
    }
}

/// Runs the section on the running service; `token` is an admin token.
pub fn run(
    rt: &tokio::runtime::Runtime,
    service: &Service,
    site: &DemoSite,
    token: &str,
) -> Result<Alarms> {
    let door = service
        .loaded()
        .controller
        .snapshot()
        .doors()
        .find(|d| d.name == ALARM_DOOR)
        .map(|d| d.id)
        .with_context(|| format!("the demo site has no door `{ALARM_DOOR}`"))?;
    let api = format!("{}/api/v1", service.url());
    let mut feed = Feed {
        rt,
        rx: service.loaded().controller.log().subscribe(),
        door,
    };
    let io = site.start_door_io()?;
    // The module's first report: the door is shut.
    feed.door_event("door-closed")?;

    // Forced: the door opens with no grant, unlock or exit request.
    io.set_inputs(vec![0]);
    let forced = feed.alarm_event("door-forced", "active")?;
    post(
        &format!("{api}/alarms/{}/ack", forced.id.0),
        token,
        serde_json::json!({ "note": NOTE }),
    )
    .context("acknowledging the forced alarm")?;
    let ack = feed.alarm_event("door-forced", "acknowledged")?;
    io.set_inputs(vec![1]);
    let cleared = feed.alarm_event("door-forced", "cleared")?;

    // Held open: unlocked by an operator, opened, and left open.
    post(
        &format!("{api}/doors/{}/unlock", door.0),
        token,
        serde_json::json!({ "reason": "a delivery for the lab" }),
    )
    .context("unlocking the lab door")?;
    io.set_inputs(vec![0]);
    feed.door_event("door-opened")?;
    let held = feed.alarm_event("door-held-open", "active")?;

    let ack_of = |e: &Event| {
        let note = e
            .event
            .data
            .as_ref()
            .and_then(|d| d["note"].as_str())
            .unwrap_or_default()
            .to_string();
        (
            e.event.time,
            e.event.actor.clone().unwrap_or_default(),
            note,
        )
    };
    let rows = vec![
        AlarmRow {
            kind: "door-forced".into(),
            door: ALARM_DOOR.into(),
            raised: forced.event.time,
            acknowledged: Some(ack_of(&ack)),
            cleared: Some(cleared.event.time),
            now: "cleared".into(),
        },
        AlarmRow {
            kind: "door-held-open".into(),
            door: ALARM_DOOR.into(),
            raised: held.event.time,
            acknowledged: None,
            cleared: None,
            now: "active (the door is still open)".into(),
        },
    ];
    Ok(Alarms { rows, io })
}

fn time(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%H:%M:%S%.3f")
        .to_string()
}

/// The section's text.
pub fn render(rows: &[AlarmRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Door alarms at `{ALARM_DOOR}` (its position switch on an OSDP I/O module, secure channel, pseudo-terminal; open allowed {HELD_OPEN_MS} ms after a grant or unlock, the reader warns {PREALARM_MS} ms before):"
    );
    let _ = writeln!(
        s,
        "  {:<15} {:<6} {:<13} {:<13} {:<13} now",
        "alarm", "door", "raised", "acknowledged", "cleared"
    );
    let dash = || "-".to_string();
    for r in rows {
        let _ = writeln!(
            s,
            "  {:<15} {:<6} {:<13} {:<13} {:<13} {}",
            r.kind,
            r.door,
            time(r.raised),
            r.acknowledged
                .as_ref()
                .map_or_else(dash, |(t, _, _)| time(*t)),
            r.cleared.map_or_else(dash, time),
            r.now
        );
    }
    for r in rows {
        if let Some((_, by, note)) = &r.acknowledged {
            let _ = writeln!(s, "  {} acknowledged by {by}: \"{note}\"", r.kind);
        }
    }
    let _ = writeln!(
        s,
        "  The door was forced open (no grant, unlock or exit request), acknowledged through POST /api/v1/alarms/{{id}}/ack and cleared when it closed; then unlocked through POST /api/v1/doors/{{id}}/unlock, opened and left open. Times UTC."
    );
    s
}
