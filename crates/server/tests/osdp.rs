//! OSDP readers in the door service: the service is the control panel of a
//! serial line (a paced pseudo-terminal pair) whose other end is a pivgate
//! reader (the links crate's peripheral device) relaying the controller's
//! APDUs to a software PIV card. Everything waits on events (the event
//! log's live feed, the reader's own callbacks), never on sleeps.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use access::jiff::Timestamp;
use card::Card;
use host::InProcess;
use links::osdp::msg::{
    color, BuzzerControl, LedControl, OutputControl, PdId, RawCard, XrdReply, XwrRequest,
};
use links::osdp::pd::{PdApp, PdConfig, PeripheralDevice};
use links::osdp::sc::Key;
use links::serial::{Link, PdHandle, Pty};
use links::transparent::CardBridge;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::config::Config;
use server::service::Service;
use store::{Event, EventKind, EventResult};

const BAUD: u32 = 115200;
const ADDRESS: u8 = 1;
/// How long a wait may take before the test fails (a bound, not a timing
/// assertion: everything normally arrives in well under a second).
const PATIENCE: Duration = Duration::from_secs(30);

/// What the reader was told to do.
#[derive(Debug, Clone, PartialEq)]
enum Told {
    Output(OutputControl),
    Led(LedControl),
    Buzzer(BuzzerControl),
    KeySet(Key),
}

/// The reader's application: relays transparent requests to the card
/// currently on it and reports every output, LED, buzzer and key command.
struct Reader {
    card: Arc<Mutex<Option<CardBridge>>>,
    told: mpsc::Sender<Told>,
}

impl PdApp for Reader {
    fn output(&mut self, c: &OutputControl) {
        let _ = self.told.send(Told::Output(*c));
    }
    fn led(&mut self, c: &LedControl) {
        let _ = self.told.send(Told::Led(*c));
    }
    fn buzzer(&mut self, c: &BuzzerControl) {
        let _ = self.told.send(Told::Buzzer(*c));
    }
    fn keyset(&mut self, key: &Key) -> bool {
        let _ = self.told.send(Told::KeySet(key.clone()));
        true
    }
    fn transparent(&mut self, r: &XwrRequest) -> Option<XrdReply> {
        self.card.lock().unwrap().as_mut()?.transparent(r)
    }
}

struct Site {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    pty: Pty,
    alice: CardCredentials,
    bob: CardCredentials,
    card: Arc<Mutex<Option<CardBridge>>>,
}

fn config_text(device: &Path, reader: &str, mechanism: &str) -> String {
    format!(
        r#"
data_dir = "data"
[http]
listen = "127.0.0.1:0"
[trust]
anchors = ["pki/root.pem"]
intermediates = ["pki/intermediate.pem"]
crls = ["pki/root.crl.pem", "pki/intermediate.crl.pem"]
[[osdp.ports]]
device = "{device}"
baud = {BAUD}
[[osdp.ports.readers]]
address = {ADDRESS}
{reader}
[seed.site]
name = "HQ"
time_zone = "UTC"
[[seed.doors]]
name = "Front"
mechanism = "{mechanism}"
[[seed.schedules]]
name = "always"
windows = ["mon-sun 00:00-24:00"]
[[seed.groups]]
name = "staff"
schedule = "always"
doors = ["Front"]
[seed.readers]
"osdp:{device}#{ADDRESS}" = "Front"
"#,
        device = device.display()
    )
}

impl Site {
    /// A PKI-CAK door whose reader has `reader` settings (TOML lines).
    fn new(reader: &str) -> Site {
        Site::with(reader, "pki-cak")
    }

    fn with(reader: &str, mechanism: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
        let issue = |name: &str| {
            pki.issue_card(&CardOptions {
                cardholder: name.into(),
                ..CardOptions::default()
            })
            .unwrap()
        };
        let (alice, bob) = (issue("Alice"), issue("Bob"));
        let pty = Pty::open().unwrap();
        std::fs::write(
            dir.path().join("pivgate.toml"),
            config_text(&pty.slave_path, reader, mechanism),
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Site {
            rt,
            dir,
            pty,
            alice,
            bob,
            card: Arc::new(Mutex::new(None)),
        }
    }

    fn key_path(&self) -> std::path::PathBuf {
        self.dir.path().join("reader.key")
    }

    fn write_key(&self, key: &Key, mode: u32) {
        let p = self.key_path();
        std::fs::write(&p, hex::encode(key.0)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn start(&self) -> Result<Service, server::service::ServeError> {
        let c = Config::load(&self.dir.path().join("pivgate.toml")).unwrap();
        self.rt.block_on(Service::start(c, None))
    }

    /// The pivgate reader at the other end of the line.
    fn reader(&self, scbk: Option<Key>, install_mode: bool) -> (PdHandle, mpsc::Receiver<Told>) {
        self.reader_with(scbk, install_mode, true)
    }

    /// `transparent`: the reader offers transparent smart-card access; without
    /// it, it can only send card data.
    fn reader_with(
        &self,
        scbk: Option<Key>,
        install_mode: bool,
        transparent: bool,
    ) -> (PdHandle, mpsc::Receiver<Told>) {
        let mut cfg = PdConfig::reader(
            ADDRESS,
            PdId {
                serial: 7,
                ..PdId::default()
            },
        );
        if !transparent {
            cfg.capabilities
                .retain(|c| c.function != links::osdp::msg::capability::SMART_CARD);
        }
        cfg.require_secure = scbk.is_some() || install_mode;
        cfg.scbk = scbk;
        cfg.install_mode = install_mode;
        let (told, rx) = mpsc::channel();
        let pd = PdHandle::spawn(
            self.pty.master.try_clone().unwrap(),
            PeripheralDevice::new(cfg),
            Box::new(Reader {
                card: self.card.clone(),
                told,
            }),
            Link::paced(BAUD),
        )
        .unwrap();
        (pd, rx)
    }

    fn enroll(&self, s: &Service, c: &CardCredentials, name: &str) {
        let l = s.loaded();
        let mut t = InProcess::new(Card::new(c.card_image(Some(3)).unwrap()));
        let validated =
            server::enroll::validate_card(l.controller.authenticator(), &mut t).unwrap();
        self.rt
            .block_on(server::enroll::register(
                &l.store,
                &validated,
                name,
                Some("staff"),
                "test",
                Timestamp::now(),
            ))
            .unwrap();
        self.rt.block_on(s.reload()).unwrap();
    }

    /// Puts `c` on the reader and has the reader report it.
    fn present(&self, pd: &PdHandle, c: &CardCredentials) {
        *self.card.lock().unwrap() = Some(CardBridge::new(
            Box::new(InProcess::new(Card::new(c.card_image(Some(3)).unwrap()))),
            0,
        ));
        pd.card_read(RawCard {
            reader: 0,
            format: 0,
            bits: 8,
            data: vec![0x5A],
        });
    }
}

/// Waits for the next committed event matching `pred`.
fn wait_event(
    rt: &tokio::runtime::Runtime,
    rx: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
    what: &str,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    common::wait_event(rt, rx, PATIENCE, what, pred)
}

fn reader_event(code: &'static str) -> impl Fn(&Event) -> bool {
    move |e| e.event.kind == EventKind::Reader && e.event.code.as_deref() == Some(code)
}

/// Waits for the reader to be told something matching `pred`.
fn wait_told(rx: &mpsc::Receiver<Told>, what: &str, pred: impl Fn(&Told) -> bool) -> Told {
    loop {
        match rx.recv_timeout(PATIENCE) {
            Ok(t) if pred(&t) => return t,
            Ok(_) => {}
            Err(_) => panic!("the reader was not told {what}"),
        }
    }
}

fn led(colour: u8) -> impl Fn(&Told) -> bool {
    move |t| matches!(t, Told::Led(l) if l.temporary.on_color == colour)
}

#[test]
fn secure_transparent_taps_feedback_lock_output_and_offline_events() {
    let key = Key([0x5C; 16]);
    let site = Site::new("key_file = \"reader.key\"\nlock_output = 0\nunlock_ms = 3000");
    site.write_key(&key, 0o600);
    let s = site.start().unwrap();
    let l = s.loaded();
    let mut events = l.controller.log().subscribe();
    let reader_id = l
        .controller
        .snapshot()
        .reader_by_connection(&format!("osdp:{}#{ADDRESS}", site.pty.slave_path.display()))
        .unwrap()
        .id;
    site.enroll(&s, &site.alice, "Alice");

    let (pd, told) = site.reader(Some(key.clone()), false);
    let online = wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));
    assert_eq!(online.event.reader, Some(reader_id));
    let reason = online.event.reason.unwrap();
    assert!(reason.contains("secure channel"), "{reason}");
    assert!(reason.contains("transparent"), "{reason}");
    assert_eq!(
        l.reader_status.get(reader_id).map(|c| c.connected),
        Some(true)
    );

    // On connection the lock relay is put in the door's mode: locked.
    let out = wait_told(&told, "to lock", |t| matches!(t, Told::Output(_)));
    assert_eq!(
        out,
        Told::Output(OutputControl {
            output: 0,
            control_code: 1,
            timer: 0
        })
    );

    // Alice is enrolled: the controller runs PKI-CAK through the reader.
    site.present(&pd, &site.alice);
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(
        tap.event.result,
        Some(EventResult::Granted),
        "{:?}",
        tap.event.reason
    );
    assert_eq!(tap.event.reader, Some(reader_id));
    assert!(tap.event.cardholder.is_some());
    let data = tap.event.data.as_ref().unwrap();
    assert_eq!(data["mechanism"], "pki-cak", "{data}");
    // The lock relay is pulsed through the reader's output, for unlock_ms.
    let out = wait_told(&told, "to pulse the lock", |t| matches!(t, Told::Output(_)));
    assert_eq!(
        out,
        Told::Output(OutputControl {
            output: 0,
            control_code: 4,
            timer: 30
        })
    );
    wait_told(&told, "a green LED", led(color::GREEN));
    wait_told(
        &told,
        "one beep",
        |t| matches!(t, Told::Buzzer(b) if b.count == 1),
    );

    // Bob is not enrolled: refused, red LED and three beeps, no output.
    site.present(&pd, &site.bob);
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(tap.event.result, Some(EventResult::Refused));
    assert_eq!(tap.event.reader, Some(reader_id));
    // The next thing the reader is told is the red LED: no lock pulse.
    let red = wait_told(&told, "a red LED", |t| {
        matches!(t, Told::Led(_) | Told::Output(_))
    });
    assert!(
        matches!(&red, Told::Led(l) if l.temporary.on_color == color::RED),
        "{red:?}"
    );
    wait_told(
        &told,
        "three beeps",
        |t| matches!(t, Told::Buzzer(b) if b.count == 3),
    );

    // A momentary unlock from the API pulses the same output.
    site.rt
        .block_on(
            l.controller
                .unlock(tap.event.door.unwrap(), "test", None, false),
        )
        .unwrap();
    let out = wait_told(&told, "to pulse the lock", |t| matches!(t, Told::Output(_)));
    assert!(matches!(out, Told::Output(o) if o.control_code == 4 && o.timer == 30));

    // The door held unlocked, then back to normal: the relay follows.
    let door_id = tap.event.door.unwrap();
    for (mode, code) in [
        (access::DoorMode::Unlocked, 2),
        (access::DoorMode::Normal, 1),
    ] {
        let mut door = l.controller.snapshot().door(door_id).unwrap().clone();
        door.mode = mode;
        site.rt.block_on(l.store.update(&door)).unwrap();
        site.rt.block_on(s.reload()).unwrap();
        let out = wait_told(&told, "the door's mode", |t| matches!(t, Told::Output(_)));
        assert_eq!(
            out,
            Told::Output(OutputControl {
                output: 0,
                control_code: code,
                timer: 0
            })
        );
    }

    // The reader stops answering: offline; back: online again.
    pd.shutdown().unwrap();
    let off = wait_event(
        &site.rt,
        &mut events,
        "offline",
        reader_event("osdp-offline"),
    );
    assert_eq!(off.event.reader, Some(reader_id));
    assert!(off.event.reason.unwrap().contains("stopped answering"));
    assert_eq!(
        l.reader_status.get(reader_id).map(|c| c.connected),
        Some(false)
    );
    // An unlock with the reader offline says so (the command is logged).
    let e = site
        .rt
        .block_on(l.controller.unlock(door_id, "test", None, false))
        .unwrap_err()
        .to_string();
    assert!(e.contains("is offline"), "{e}");
    let (pd, _told) = site.reader(Some(key), false);
    wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));

    // Tamper and power changes (osdp_LSTAT) are events.
    pd.set_local_status(true, false);
    wait_event(&site.rt, &mut events, "tamper", reader_event("osdp-tamper"));
    pd.set_local_status(false, true);
    wait_event(
        &site.rt,
        &mut events,
        "tamper cleared",
        reader_event("osdp-tamper-cleared"),
    );
    wait_event(
        &site.rt,
        &mut events,
        "power",
        reader_event("osdp-power-failure"),
    );

    site.rt.block_on(s.shutdown()).unwrap();
    pd.shutdown().unwrap();
}

#[test]
fn a_reader_with_another_key_is_refused_with_an_event() {
    let site = Site::new("key_file = \"reader.key\"");
    site.write_key(&Key([0x11; 16]), 0o600);
    let s = site.start().unwrap();
    let mut events = s.loaded().controller.log().subscribe();
    let (pd, _told) = site.reader(Some(Key([0x22; 16])), false);
    let e = wait_event(
        &site.rt,
        &mut events,
        "refused",
        reader_event("osdp-refused"),
    );
    let reason = e.event.reason.unwrap();
    assert!(reason.contains("not trusted"), "{reason}");
    assert!(e.event.reader.is_some());
    site.rt.block_on(s.shutdown()).unwrap();
    pd.shutdown().unwrap();
}

#[test]
fn a_key_file_readable_by_others_stops_start_up() {
    let site = Site::new("key_file = \"reader.key\"");
    site.write_key(&Key([0x11; 16]), 0o644);
    let e = site.start().unwrap_err().to_string();
    assert!(e.contains("osdp.ports[0].readers[0].key_file"), "{e}");
    assert!(e.contains(&site.key_path().display().to_string()), "{e}");
    assert!(e.contains("chmod 600"), "{e}");

    std::fs::write(site.key_path(), "not hex").unwrap();
    std::fs::set_permissions(site.key_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let e = site.start().unwrap_err().to_string();
    assert!(e.contains("32 hex digits"), "{e}");

    // Owned by another user (only a privileged test run can make one).
    site.write_key(&Key([0x11; 16]), 0o600);
    if std::os::unix::fs::chown(site.key_path(), Some(65534), None).is_ok() {
        let e = site.start().unwrap_err().to_string();
        assert!(e.contains("owned by user 65534"), "{e}");
        assert!(e.contains("chown"), "{e}");
    }
}

#[test]
fn a_serial_device_that_cannot_be_opened_stops_start_up() {
    let site = Site::new("secure = false");
    let text = std::fs::read_to_string(site.dir.path().join("pivgate.toml")).unwrap();
    let text = text.replace(
        &format!("device = \"{}\"", site.pty.slave_path.display()),
        "device = \"/nonexistent/ttyOSDP\"",
    );
    std::fs::write(site.dir.path().join("pivgate.toml"), text).unwrap();
    let e = site.start().unwrap_err().to_string();
    assert!(e.contains("`osdp.ports[0].device`"), "{e}");
    assert!(e.contains("/nonexistent/ttyOSDP"), "{e}");
}

#[test]
fn install_mode_writes_the_key_file_and_the_next_start_uses_it() {
    let site = Site::new("key_file = \"reader.key\"\ninstall_mode = true");
    let s = site.start().unwrap();
    let mut events = s.loaded().controller.log().subscribe();
    let (pd, told) = site.reader(None, true);
    let installed = match wait_told(&told, "a new key", |t| matches!(t, Told::KeySet(_))) {
        Told::KeySet(k) => k,
        _ => unreachable!(),
    };
    assert!(!installed.is_default());
    wait_event(
        &site.rt,
        &mut events,
        "key installed",
        reader_event("osdp-key-installed"),
    );
    let meta = std::fs::metadata(site.key_path()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(site.key_path()).unwrap();
    assert_eq!(text.trim(), hex::encode(installed.0));
    // Then online with the new key.
    let online = wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));
    assert!(online.event.reason.unwrap().contains("secure channel"));
    site.rt.block_on(s.shutdown()).unwrap();
    pd.shutdown().unwrap();

    // The next start reads the key file: a reader holding only that key
    // (out of install mode, SCBK-D refused) comes online over it.
    let s = site.start().unwrap();
    let mut events = s.loaded().controller.log().subscribe();
    let (pd, _told) = site.reader(Some(installed), false);
    let online = wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));
    assert!(online.event.reason.unwrap().contains("secure channel"));
    assert!(!site.dir.path().join("reader.key.new").exists());
    site.rt.block_on(s.shutdown()).unwrap();
    pd.shutdown().unwrap();
}

#[test]
fn card_data_without_transparent_mode_is_refused_at_a_pki_door() {
    let site = Site::new("secure = false");
    let s = site.start().unwrap();
    let l = s.loaded();
    let mut events = l.controller.log().subscribe();
    site.enroll(&s, &site.alice, "Alice");
    let (pd, told) = site.reader_with(None, false, false);
    let online = wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));
    let reason = online.event.reason.unwrap();
    assert!(
        reason.contains("plaintext") && reason.contains("card data only"),
        "{reason}"
    );

    // Even with Alice's card on it, the reader can only send its number.
    site.present(&pd, &site.alice);
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(tap.event.result, Some(EventResult::Refused));
    assert_eq!(
        tap.event.code.as_deref(),
        Some(server::osdp::UNTRUSTED_CARD_DATA)
    );
    assert!(tap.event.reader.is_some());
    let reason = tap.event.reason.unwrap();
    assert!(reason.contains("transparent"), "{reason}");
    assert_eq!(tap.event.data.as_ref().unwrap()["bits"], 8);
    let red = wait_told(&told, "a red LED", |t| {
        matches!(t, Told::Led(_) | Told::Output(_))
    });
    assert!(
        matches!(&red, Told::Led(l) if l.temporary.on_color == color::RED),
        "{red:?}"
    );

    // A 200-bit FASC-N frame of Alice's card: refused, but the event names
    // the credential and cardholder it claims to be.
    let fascn = site.alice.fascn.encode().unwrap();
    pd.card_read(RawCard {
        reader: 0,
        format: 1,
        bits: 200,
        data: fascn.to_vec(),
    });
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(tap.event.result, Some(EventResult::Refused));
    assert_eq!(
        tap.event.code.as_deref(),
        Some(server::osdp::UNTRUSTED_CARD_DATA)
    );
    assert!(tap.event.cardholder.is_some(), "{:?}", tap.event);
    assert!(tap.event.credential.is_some(), "{:?}", tap.event);
    let data = tap.event.data.as_ref().unwrap();
    assert_eq!(data["bits"], 200);
    assert_eq!(data["fasc_n"], hex::encode(fascn), "{data}");
    // A frame whose LRC is wrong identifies nobody.
    let mut broken = fascn;
    broken[24] ^= 0x01;
    pd.card_read(RawCard {
        reader: 0,
        format: 1,
        bits: 200,
        data: broken.to_vec(),
    });
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert!(tap.event.cardholder.is_none(), "{:?}", tap.event);
    assert!(tap.event.data.as_ref().unwrap().get("fasc_n").is_none());

    // osdp_FMT card data too.
    pd.card_text(0, b"12345678");
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(
        tap.event.code.as_deref(),
        Some(server::osdp::UNTRUSTED_CARD_DATA)
    );
    site.rt.block_on(s.shutdown()).unwrap();
    pd.shutdown().unwrap();
}

#[test]
fn the_reader_keypad_is_the_pin_source_of_a_card_and_pin_door() {
    let key = Key([0x3A; 16]);
    let site = Site::with("key_file = \"reader.key\"", "pki-auth");
    site.write_key(&key, 0o600);
    let s = site.start().unwrap();
    let l = s.loaded();
    let mut events = l.controller.log().subscribe();
    site.enroll(&s, &site.alice, "Alice");
    let (pd, _told) = site.reader(Some(key), false);
    wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));

    // The PIN typed before the card (digits, then # as OSDP sends it).
    pd.keypad(0, b"123456\r");
    site.present(&pd, &site.alice);
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(
        tap.event.result,
        Some(EventResult::Granted),
        "{:?}",
        tap.event.reason
    );
    assert_eq!(tap.event.data.as_ref().unwrap()["mechanism"], "pki-auth");

    // A wrong PIN typed after the card (the tap waits for it); `*` clears
    // what was typed before it.
    site.present(&pd, &site.alice);
    pd.keypad(0, b"12\x7f999999#");
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(tap.event.code.as_deref(), Some("wrong-pin"));
    site.rt.block_on(s.shutdown()).unwrap();
    pd.shutdown().unwrap();
}

/// libosdp (PyPI, installed by scripts/setup.sh) as the reader: a
/// third-party reader without transparent mode, sending Wiegand card data.
mod libosdp {
    use super::*;
    use std::io::{Read, Write};
    use testbed::libosdp::Peer;

    /// Copies bytes from one pseudo-terminal's controlling side to
    /// another's, so two programs that each open a tty by path share a line.
    fn relay(mut from: std::fs::File, mut to: std::fs::File) {
        std::thread::spawn(move || {
            let mut b = [0u8; 512];
            while let Ok(n) = from.read(&mut b) {
                if n == 0 || to.write_all(&b[..n]).is_err() {
                    break;
                }
            }
        });
    }

    #[test]
    fn card_data_from_a_libosdp_reader_is_refused_with_a_red_led() {
        let site = Site::new("secure = false");
        let far = Pty::open().unwrap();
        relay(
            site.pty.master.try_clone().unwrap(),
            far.master.try_clone().unwrap(),
        );
        relay(
            far.master.try_clone().unwrap(),
            site.pty.master.try_clone().unwrap(),
        );
        let s = site.start().unwrap();
        let mut events = s.loaded().controller.log().subscribe();
        let mut peer = Peer::start(
            "libosdp_pd.py",
            &[
                "--device".into(),
                far.slave_path.display().to_string(),
                "--address".into(),
                ADDRESS.to_string(),
            ],
            PATIENCE,
        );
        peer.expect("ready", |v| v["ready"] == true);
        let online = wait_event(&site.rt, &mut events, "online", reader_event("osdp-online"));
        let reason = online.event.reason.unwrap();
        assert!(reason.contains("card data only"), "{reason}");

        // A 26-bit Wiegand read.
        peer.send(serde_json::json!({"card": "02020040", "bits": 26, "format": "wiegand"}));
        let tap = wait_event(&site.rt, &mut events, "tap", |e| {
            e.event.kind == EventKind::Tap
        });
        assert_eq!(
            tap.event.code.as_deref(),
            Some(server::osdp::UNTRUSTED_CARD_DATA)
        );
        let data = tap.event.data.unwrap();
        assert_eq!(data["bits"], 26);
        assert_eq!(data["format"], 1);
        // libosdp's reader shows red.
        peer.expect("a red LED", |v| {
            v["command"].get("led_number").is_some()
                && v["command"]["temp_on_color"]
                    .as_i64()
                    .or(v["command"]["on_color"].as_i64())
                    == Some(i64::from(color::RED))
        });
        site.rt.block_on(s.shutdown()).unwrap();
    }
}

/// Copies everything read from `from` to each of `to` (a multidrop bus: every
/// reader hears the panel, the panel hears every reader).
fn bus_relay(mut from: std::fs::File, to: Vec<std::fs::File>) {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let mut to = to;
        let mut b = [0u8; 512];
        while let Ok(n) = from.read(&mut b) {
            if n == 0 {
                break;
            }
            for t in &mut to {
                let _ = t.write_all(&b[..n]);
            }
        }
    });
}

#[test]
fn two_readers_on_one_bus_one_with_the_wrong_key() {
    let good = Key([0x77; 16]);
    let site = Site::new(
        "key_file = \"reader.key\"\n[[osdp.ports.readers]]\naddress = 2\nkey_file = \"reader2.key\"",
    );
    site.write_key(&Key([0x66; 16]), 0o600);
    let second = site.dir.path().join("reader2.key");
    std::fs::write(&second, hex::encode(good.0)).unwrap();
    std::fs::set_permissions(&second, std::fs::Permissions::from_mode(0o600)).unwrap();
    let conf = site.dir.path().join("pivgate.toml");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(&format!(
        "\"osdp:{}#2\" = \"Front\"\n",
        site.pty.slave_path.display()
    ));
    std::fs::write(&conf, text).unwrap();

    // Two readers, each on its own pseudo-terminal, joined into one bus.
    let (a, b) = (Pty::open().unwrap(), Pty::open().unwrap());
    bus_relay(
        site.pty.master.try_clone().unwrap(),
        vec![a.master.try_clone().unwrap(), b.master.try_clone().unwrap()],
    );
    bus_relay(
        a.master.try_clone().unwrap(),
        vec![site.pty.master.try_clone().unwrap()],
    );
    bus_relay(
        b.master.try_clone().unwrap(),
        vec![site.pty.master.try_clone().unwrap()],
    );
    let s = site.start().unwrap();
    let l = s.loaded();
    let mut events = l.controller.log().subscribe();
    site.enroll(&s, &site.alice, "Alice");
    let connection = |n: u8| format!("osdp:{}#{n}", site.pty.slave_path.display());
    let id = |n: u8| {
        l.controller
            .snapshot()
            .reader_by_connection(&connection(n))
            .unwrap()
            .id
    };

    let pd = |address: u8, key: &Key, port: &Pty| {
        let mut cfg = PdConfig::reader(
            address,
            PdId {
                serial: u32::from(address),
                ..PdId::default()
            },
        );
        cfg.scbk = Some(key.clone());
        cfg.require_secure = true;
        let (told, _rx) = mpsc::channel();
        PdHandle::spawn(
            port.slave.try_clone().unwrap(),
            PeripheralDevice::new(cfg),
            Box::new(Reader {
                card: site.card.clone(),
                told,
            }),
            Link::paced(BAUD),
        )
        .unwrap()
    };
    // Reader 1 holds another key than the one configured for it.
    let pd1 = pd(1, &good, &a);
    let pd2 = pd(2, &good, &b);
    // In either order: reader 1 refused, reader 2 online.
    let (mut refused, mut online) = (None, None);
    while refused.is_none() || online.is_none() {
        let e = wait_event(&site.rt, &mut events, "reader", |e| {
            e.event.kind == EventKind::Reader
        });
        match e.event.code.as_deref() {
            Some("osdp-refused") => refused = e.event.reader,
            Some("osdp-online") => online = e.event.reader,
            _ => {}
        }
    }
    assert_eq!(refused, Some(id(1)));
    assert_eq!(online, Some(id(2)));

    // Reader 2 serves taps all the same.
    site.present(&pd2, &site.alice);
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(
        tap.event.result,
        Some(EventResult::Granted),
        "{:?}",
        tap.event.reason
    );
    assert_eq!(tap.event.reader, Some(id(2)));
    // The refused reader's card is not read.
    site.present(&pd1, &site.alice);
    site.present(&pd2, &site.alice);
    let tap = wait_event(&site.rt, &mut events, "tap", |e| {
        e.event.kind == EventKind::Tap
    });
    assert_eq!(tap.event.reader, Some(id(2)));
    assert_eq!(l.reader_status.get(id(1)).map(|c| c.connected), Some(false));
    site.rt.block_on(s.shutdown()).unwrap();
    pd1.shutdown().unwrap();
    pd2.shutdown().unwrap();
}
