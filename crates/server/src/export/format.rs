//! The messages a syslog sink sends: RFC 5424 with the event's fields as
//! structured data, or a CEF record carried as an RFC 5424 message, each
//! framed by octet counting (RFC 6587 §3.4.1). Pure functions.
//!
//! An RFC 5424 message for an event:
//!
//! ```text
//! <PRI>1 TIMESTAMP HOSTNAME pivgate PROCID MSGID [pivgate@32473 eventId="…" kind="…" …] MSG
//! ```
//!
//! - PRI: facility `authpriv` (10) and a severity by event: a granted tap
//!   is informational (6), a refused tap, an admin change and a door
//!   command are notices (5), a reader event is a warning (4).
//! - TIMESTAMP: the event's time in UTC, to the microsecond.
//! - MSGID: the event's kind (`tap`, `admin`, `door-command`, `reader`).
//! - Structured data: one element whose SD-ID is `pivgate@32473`. 32473 is
//!   the private enterprise number RFC 5612 reserves for documentation
//!   examples: pivgate has no number of its own, so receivers should key
//!   on the whole SD-ID. Its parameters are the event's fields that are
//!   set: `eventId`, `kind`, `result`, `code`, `door`, `reader`,
//!   `cardholder`, `credential`, `actor`, `reason` (ids as numbers);
//!   `"`, `\` and `]` in values are escaped with `\` (RFC 5424 §6.3.3).
//! - MSG: the reason, or the kind and code when there is none.
//!
//! A CEF record (`format = "cef"`) is the MSG of an RFC 5424 message
//! without structured data:
//!
//! ```text
//! CEF:0|pivgate|pivgate|VERSION|SIGNATURE|NAME|SEVERITY|EXTENSION
//! ```
//!
//! SIGNATURE is `kind` or `kind:code`, NAME the same text as MSG above,
//! SEVERITY 3 for a granted tap, 7 for a refused one and 5 otherwise. The
//! extension has `rt` (milliseconds since the epoch), `externalId` (the
//! event id), `cat` (kind), `outcome` (result), `reason`, `suser` (the
//! actor), and custom strings with their labels: `cs1` door, `cs2`
//! reader, `cs3` cardholder, `cs4` credential, `cs5` code. Header fields
//! escape `\` and `|`; extension values escape `\`, `=` and line breaks.

use store::{Event, EventKind, EventResult};

/// The private enterprise number in the SD-ID: RFC 5612's documentation
/// number (pivgate has none registered).
pub const ENTERPRISE_NUMBER: u32 = 32473;

/// The SD-ID of the event's structured data element.
pub const SD_ID: &str = "pivgate@32473";

/// The APP-NAME of every message.
pub const APP_NAME: &str = "pivgate";

/// `authpriv`: security and authorization messages.
const FACILITY: u8 = 10;

/// What a message needs besides the event.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The HOSTNAME field (`-` when unknown).
    pub hostname: String,
    /// The PROCID field.
    pub procid: u32,
}

impl Origin {
    /// This machine's host name and this process.
    pub fn this_process() -> Origin {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        Origin {
            hostname: header_field(name.trim(), 255),
            procid: std::process::id(),
        }
    }
}

/// A header field: printable US-ASCII without spaces, at most `max`
/// characters, `-` (the NILVALUE) when nothing is left.
fn header_field(s: &str, max: usize) -> String {
    let v: String = s
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(max)
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v
    }
}

/// The RFC 5424 severity of `e`.
pub fn severity(e: &Event) -> u8 {
    match (e.event.kind, e.event.result) {
        (EventKind::Tap, Some(EventResult::Granted)) => 6,
        (EventKind::Reader, _) => 4,
        _ => 5,
    }
}

/// The one-line text of `e`: its reason, else its kind and code.
pub fn summary(e: &Event) -> String {
    let text = match (&e.event.reason, &e.event.code) {
        (Some(r), _) if !r.is_empty() => r.clone(),
        (_, Some(c)) => format!("{} {c}", e.event.kind),
        _ => e.event.kind.to_string(),
    };
    one_line(&text)
}

/// `s` with control characters replaced by spaces.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The event's fields that are set, as name and value, in a fixed order.
pub fn fields(e: &Event) -> Vec<(&'static str, String)> {
    let n = &e.event;
    let mut f = vec![("eventId", e.id.to_string()), ("kind", n.kind.to_string())];
    let opt = [
        ("result", n.result.map(|r| r.to_string())),
        ("code", n.code.clone()),
        ("door", n.door.map(|v| v.to_string())),
        ("reader", n.reader.map(|v| v.to_string())),
        ("cardholder", n.cardholder.map(|v| v.to_string())),
        ("credential", n.credential.map(|v| v.to_string())),
        ("actor", n.actor.clone()),
        ("reason", n.reason.clone()),
    ];
    f.extend(opt.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
    f
}

/// An SD-PARAM value escaped (RFC 5424 §6.3.3): `"`, `\` and `]`.
pub fn escape_sd_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The event's time in UTC to the microsecond (RFC 5424 allows six
/// fractional digits).
fn timestamp(e: &Event) -> String {
    let micros = e.event.time.as_microsecond();
    access::jiff::Timestamp::from_microsecond(micros)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "-".into())
}

fn header(e: &Event, origin: &Origin) -> String {
    format!(
        "<{}>1 {} {} {APP_NAME} {} {}",
        u16::from(FACILITY) * 8 + u16::from(severity(e)),
        timestamp(e),
        origin.hostname,
        origin.procid,
        header_field(e.event.kind.as_str(), 32),
    )
}

/// The RFC 5424 message of `e`, its fields as structured data.
pub fn rfc5424(e: &Event, origin: &Origin) -> String {
    let mut sd = format!("[{SD_ID}");
    for (k, v) in fields(e) {
        sd.push_str(&format!(" {k}=\"{}\"", escape_sd_value(&one_line(&v))));
    }
    sd.push(']');
    format!("{} {sd} {}", header(e, origin), summary(e))
}

/// A CEF header field escaped: `\` and `|`.
pub fn escape_cef_header(v: &str) -> String {
    one_line(v).replace('\\', "\\\\").replace('|', "\\|")
}

/// A CEF extension value escaped: `\`, `=` and line breaks.
pub fn escape_cef_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '=' => out.push_str("\\="),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// The CEF record of `e`.
pub fn cef(e: &Event) -> String {
    let n = &e.event;
    let signature = match &n.code {
        Some(c) => format!("{}:{c}", n.kind),
        None => n.kind.to_string(),
    };
    let severity = match (n.kind, n.result) {
        (EventKind::Tap, Some(EventResult::Granted)) => 3,
        (EventKind::Tap, Some(EventResult::Refused)) => 7,
        _ => 5,
    };
    let mut ext: Vec<(&str, String)> = vec![
        ("rt", n.time.as_millisecond().to_string()),
        ("externalId", e.id.to_string()),
        ("cat", n.kind.to_string()),
    ];
    if let Some(r) = n.result {
        ext.push(("outcome", r.to_string()));
    }
    if let Some(r) = &n.reason {
        ext.push(("reason", r.clone()));
    }
    if let Some(a) = &n.actor {
        ext.push(("suser", a.clone()));
    }
    let custom = [
        ("door", n.door.map(|v| v.to_string())),
        ("reader", n.reader.map(|v| v.to_string())),
        ("cardholder", n.cardholder.map(|v| v.to_string())),
        ("credential", n.credential.map(|v| v.to_string())),
        ("code", n.code.clone()),
    ];
    let labels = ["cs1", "cs2", "cs3", "cs4", "cs5"];
    let label_keys = ["cs1Label", "cs2Label", "cs3Label", "cs4Label", "cs5Label"];
    for (i, (label, value)) in custom.into_iter().enumerate() {
        if let Some(v) = value {
            ext.push((label_keys[i], label.to_string()));
            ext.push((labels[i], v));
        }
    }
    let ext: Vec<String> = ext
        .into_iter()
        .map(|(k, v)| format!("{k}={}", escape_cef_value(&v)))
        .collect();
    format!(
        "CEF:0|pivgate|pivgate|{}|{}|{}|{severity}|{}",
        escape_cef_header(env!("CARGO_PKG_VERSION")),
        escape_cef_header(&signature),
        escape_cef_header(&summary(e)),
        ext.join(" ")
    )
}

/// The RFC 5424 message carrying the CEF record of `e`.
pub fn cef_message(e: &Event, origin: &Origin) -> String {
    format!("{} - {}", header(e, origin), cef(e))
}

/// Appends `msg` to `out` framed by octet counting: its length in bytes,
/// a space, the message (RFC 6587 §3.4.1).
pub fn frame(msg: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(msg.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(msg.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use access::jiff::Timestamp;
    use access::{CardholderId, DoorId};
    use store::{EventId, NewEvent};

    fn event(reason: &str) -> Event {
        Event {
            id: EventId(42),
            event: NewEvent {
                time: Timestamp::from_microsecond(1_700_000_000_123_456).unwrap(),
                kind: EventKind::Tap,
                door: Some(DoorId(1)),
                reader: None,
                cardholder: Some(CardholderId(7)),
                credential: None,
                result: Some(EventResult::Refused),
                code: Some("certificate.revoked".into()),
                reason: Some(reason.into()),
                actor: None,
                data: None,
                passback: false,
            },
        }
    }

    fn origin() -> Origin {
        Origin {
            hostname: "gate-1".into(),
            procid: 99,
        }
    }

    #[test]
    fn an_rfc5424_message_has_the_fields_as_structured_data() {
        let m = rfc5424(&event("revoked \"x\" [a\\b]\nnext"), &origin());
        assert_eq!(
            m,
            "<85>1 2023-11-14T22:13:20.123456Z gate-1 pivgate 99 tap [pivgate@32473 eventId=\"42\" kind=\"tap\" result=\"refused\" code=\"certificate.revoked\" door=\"1\" cardholder=\"7\" reason=\"revoked \\\"x\\\" [a\\\\b\\] next\"] revoked \"x\" [a\\b] next"
        );
    }

    #[test]
    fn sd_values_escape_quote_backslash_and_bracket_only() {
        assert_eq!(escape_sd_value(r#"a"b\c]d[e="#), r#"a\"b\\c\]d[e="#);
    }

    #[test]
    fn a_cef_record_escapes_header_and_extension() {
        let mut e = event("a=b\\c|d\ne");
        e.event.code = Some("x|y".into());
        let c = cef(&e);
        let head = format!(
            "CEF:0|pivgate|pivgate|{}|tap:x\\|y|a=b\\\\c\\|d e|7|",
            env!("CARGO_PKG_VERSION")
        );
        assert!(c.starts_with(&head), "{c}");
        let ext = &c[head.len()..];
        assert_eq!(
            ext,
            "rt=1700000000123 externalId=42 cat=tap outcome=refused reason=a\\=b\\\\c|d\\ne cs1Label=door cs1=1 cs3Label=cardholder cs3=7 cs5Label=code cs5=x|y"
        );
    }

    #[test]
    fn frames_count_bytes_not_characters() {
        let mut out = Vec::new();
        frame("é", &mut out);
        frame("ab", &mut out);
        assert_eq!(out, "2 é2 ab".as_bytes());
    }

    #[test]
    fn header_fields_are_printable_ascii_or_nil() {
        assert_eq!(header_field("a b\tc", 255), "abc");
        assert_eq!(header_field("", 255), "-");
        assert_eq!(header_field(&"x".repeat(300), 255).len(), 255);
    }
}
