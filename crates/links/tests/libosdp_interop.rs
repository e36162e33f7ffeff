//! Interop with libosdp (the reference open implementation, PyPI package
//! `libosdp`, installed by scripts/setup.sh) over a pseudo-terminal pair paced
//! at 115200 baud: pivgate as control panel with libosdp as reader, and the
//! other way round. The peers are the small scripts in tests/peers/.

use std::sync::mpsc;
use std::time::Duration;

use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, PdSetup};
use links::osdp::msg::{
    BuzzerControl, Command, LedControl, LedState, OutputControl, RawCard, Reply,
};
use links::osdp::pd::{PdApp, PdConfig, PdEvent, PeripheralDevice};
use links::osdp::sc::Key;
use links::serial::{CpHandle, Link, PdHandle, Pty};
use serde_json::{json, Value};
use testbed::libosdp::Peer;

const WAIT: Duration = Duration::from_secs(15);

/// A libosdp peer script of tests/peers/.
fn start_peer(script: &str, args: &[String]) -> Peer {
    Peer::start(script, args, WAIT)
}

fn cmd_field(v: &Value, k: &str) -> i64 {
    v["command"][k].as_i64().unwrap_or(-1)
}

fn wait_cp(cp: &CpHandle, what: &str, pred: impl FnMut(&CpEvent) -> bool) -> CpEvent {
    cp.wait_for(WAIT, pred)
        .unwrap_or_else(|| panic!("pivgate CP: no {what}"))
}

#[test]
fn pivgate_cp_with_libosdp_pd_plain() {
    let pty = Pty::open().unwrap();
    let mut peer = start_peer(
        "libosdp_pd.py",
        &[
            "--device".into(),
            pty.slave_path.display().to_string(),
            "--address".into(),
            "101".into(),
        ],
    );
    peer.expect("ready", |v| v["ready"] == true);
    let cp = ControlPanel::new(CpConfig::default(), vec![PdSetup::plain(101)]);
    let cp = CpHandle::spawn(pty.master.try_clone().unwrap(), cp, Link::paced(115200)).unwrap();

    let online = wait_cp(&cp, "online", |e| matches!(e, CpEvent::Online { .. }));
    let CpEvent::Online {
        id,
        capabilities,
        secure,
        ..
    } = online
    else {
        unreachable!()
    };
    assert!(!secure);
    assert_eq!(id.serial, 0x01020304);
    assert_eq!(id.vendor, [0xEF, 0xCD, 0xAB]);
    assert_eq!(id.model, 7);
    assert_eq!(id.version, 2);
    assert!(
        capabilities.iter().any(|c| c.function == 4 && c.items == 1),
        "{capabilities:?}"
    );

    // Card read (Wiegand, 26 bits).
    peer.send(json!({"card": "02020040", "bits": 26, "format": "wiegand"}));
    let card = wait_cp(&cp, "card read", |e| matches!(e, CpEvent::Card { .. }));
    assert_eq!(
        card,
        CpEvent::Card {
            address: 101,
            card: RawCard {
                reader: 0,
                format: 1,
                bits: 26,
                data: vec![0x02, 0x02, 0x00, 0x40]
            }
        }
    );
    // Keypad.
    peer.send(json!({"keypad": "31323334"}));
    let keys = wait_cp(&cp, "keypad", |e| matches!(e, CpEvent::Keypad { .. }));
    assert_eq!(
        keys,
        CpEvent::Keypad {
            address: 101,
            reader: 0,
            keys: b"1234".to_vec()
        }
    );

    // LED, buzzer, output.
    let led = LedControl {
        reader: 0,
        led: 0,
        temporary: LedState {
            control_code: 2,
            on_time: 5,
            off_time: 5,
            on_color: 2,
            off_color: 0,
        },
        timer: 30,
        permanent: LedState {
            control_code: 1,
            on_time: 1,
            off_time: 0,
            on_color: 1,
            off_color: 0,
        },
    };
    cp.submit(101, Command::Led(vec![led])).unwrap();
    wait_cp(&cp, "LED ack", |e| {
        matches!(
            e,
            CpEvent::Completed {
                command: 0x69,
                reply: Reply::Ack,
                ..
            }
        )
    });
    let v = peer.expect("LED command", |v| {
        v["command"]["command"].is_number() && v["command"].get("led_number").is_some()
    });
    assert_eq!(cmd_field(&v, "on_color"), 2);
    assert_eq!(cmd_field(&v, "timer_count"), 30);

    cp.submit(
        101,
        Command::Buzzer(BuzzerControl {
            reader: 0,
            tone: 2,
            on_time: 3,
            off_time: 1,
            count: 2,
        }),
    )
    .unwrap();
    wait_cp(&cp, "buzzer ack", |e| {
        matches!(
            e,
            CpEvent::Completed {
                command: 0x6A,
                reply: Reply::Ack,
                ..
            }
        )
    });
    let v = peer.expect("buzzer command", |v| {
        v["command"].get("rep_count").is_some()
    });
    assert_eq!(cmd_field(&v, "on_count"), 3);
    assert_eq!(cmd_field(&v, "rep_count"), 2);

    cp.submit(
        101,
        Command::Output(vec![OutputControl {
            output: 0,
            control_code: 4,
            timer: 50,
        }]),
    )
    .unwrap();
    wait_cp(&cp, "output reply", |e| {
        matches!(e, CpEvent::Completed { command: 0x68, .. })
    });
    let v = peer.expect("output command", |v| {
        v["command"].get("output_no").is_some()
    });
    assert_eq!(cmd_field(&v, "control_code"), 4);
    assert_eq!(cmd_field(&v, "timer_count"), 50);

    let stats = cp.shutdown().unwrap();
    assert!(stats.tx_bytes > 0 && stats.rx_bytes > 0);
    drop(pty);
}

#[test]
fn pivgate_cp_installs_a_key_on_libosdp_pd_in_install_mode() {
    let pty = Pty::open().unwrap();
    let mut peer = start_peer(
        "libosdp_pd.py",
        &[
            "--device".into(),
            pty.slave_path.display().to_string(),
            "--address".into(),
            "17".into(),
            "--install-mode".into(),
        ],
    );
    peer.expect("ready", |v| v["ready"] == true);
    let key = Key(*b"pivgate-osdp-key");
    let setup = PdSetup {
        address: 17,
        scbk: Some(key.clone()),
        install_mode: true,
    };
    let cp = ControlPanel::new(CpConfig::default(), vec![setup]);
    let cp = CpHandle::spawn(pty.master.try_clone().unwrap(), cp, Link::paced(115200)).unwrap();

    wait_cp(&cp, "key installed", |e| {
        matches!(e, CpEvent::KeyInstalled { address: 17 })
    });
    let v = peer.expect("KEYSET command", |v| {
        v["command"].get("type").is_some() && v["command"].get("data").is_some()
    });
    assert_eq!(v["command"]["data"], hex::encode(key.0));
    let online = wait_cp(&cp, "secure online", |e| {
        matches!(e, CpEvent::Online { .. })
    });
    assert!(
        matches!(online, CpEvent::Online { secure: true, .. }),
        "{online:?}"
    );
    peer.send(json!({"query": "sc"}));
    peer.expect("sc status", |v| v["sc_active"] == true);

    // Encrypted traffic both ways with the new key.
    peer.send(json!({"card": "a5a5a5", "bits": 24, "format": "raw"}));
    let card = wait_cp(&cp, "card read", |e| matches!(e, CpEvent::Card { .. }));
    assert_eq!(
        card,
        CpEvent::Card {
            address: 17,
            card: RawCard {
                reader: 0,
                format: 0,
                bits: 24,
                data: vec![0xa5; 3]
            }
        }
    );
    cp.submit(
        17,
        Command::Output(vec![OutputControl {
            output: 0,
            control_code: 2,
            timer: 0,
        }]),
    )
    .unwrap();
    wait_cp(&cp, "output reply", |e| {
        matches!(e, CpEvent::Completed { command: 0x68, .. })
    });
    peer.expect("output command", |v| {
        v["command"].get("output_no").is_some()
    });
    cp.shutdown().unwrap();
    drop(peer);

    // The same reader, restarted with the installed key and install mode over:
    // a panel that offers SCBK-D is refused.
    let pty = Pty::open().unwrap();
    let peer = start_peer(
        "libosdp_pd.py",
        &[
            "--device".into(),
            pty.slave_path.display().to_string(),
            "--address".into(),
            "17".into(),
            "--scbk".into(),
            hex::encode(key.0),
            "--enforce-secure".into(),
        ],
    );
    peer.expect("ready", |v| v["ready"] == true);
    let setup = PdSetup {
        address: 17,
        scbk: Some(Key([0x99; 16])),
        install_mode: true,
    };
    let cp = ControlPanel::new(CpConfig::default(), vec![setup]);
    let cp = CpHandle::spawn(pty.master.try_clone().unwrap(), cp, Link::paced(115200)).unwrap();
    let refused = wait_cp(&cp, "refusal", |e| matches!(e, CpEvent::Refused { .. }));
    assert!(
        matches!(refused, CpEvent::Refused { address: 17, .. }),
        "{refused:?}"
    );
    assert!(cp
        .wait_for(Duration::from_millis(500), |e| matches!(
            e,
            CpEvent::Online { .. }
        ))
        .is_none());
    cp.shutdown().unwrap();
}

#[derive(Clone)]
struct Forward(mpsc::Sender<String>);

impl PdApp for Forward {
    fn output(&mut self, c: &OutputControl) {
        let _ = self.0.send(format!(
            "output {} {} {}",
            c.output, c.control_code, c.timer
        ));
    }
    fn led(&mut self, c: &LedControl) {
        let _ = self
            .0
            .send(format!("led {} {}", c.temporary.on_color, c.timer));
    }
    fn buzzer(&mut self, c: &BuzzerControl) {
        let _ = self
            .0
            .send(format!("buzzer {} {} {}", c.on_time, c.off_time, c.count));
    }
}

fn pivgate_pd_with_libosdp_cp(scbk: Option<Key>) {
    let pty = Pty::open().unwrap();
    let mut cfg = PdConfig::reader(
        42,
        links::osdp::msg::PdId {
            vendor: [1, 2, 3],
            model: 4,
            version: 5,
            serial: 0xCAFE,
            firmware: [1, 2, 3],
        },
    );
    cfg.scbk = scbk.clone();
    cfg.require_secure = scbk.is_some();
    let (tx, app_rx) = mpsc::channel();
    let pd = PdHandle::spawn(
        pty.master.try_clone().unwrap(),
        PeripheralDevice::new(cfg),
        Box::new(Forward(tx)),
        Link::paced(115200),
    )
    .unwrap();
    let mut args = vec![
        "--device".to_string(),
        pty.slave_path.display().to_string(),
        "--address".into(),
        "42".into(),
    ];
    if let Some(k) = &scbk {
        args.extend(["--scbk".into(), hex::encode(k.0)]);
    }
    let mut peer = start_peer("libosdp_cp.py", &args);
    let st = peer.expect("online status", |v| v.get("online").is_some());
    assert_eq!(
        st["online"], true,
        "libosdp CP did not bring the pivgate PD online"
    );
    assert_eq!(st["sc"], scbk.is_some());
    if scbk.is_some() {
        let secured = pd
            .events()
            .recv_timeout(WAIT)
            .into_iter()
            .chain(pd.events().try_iter())
            .any(|e| matches!(e, PdEvent::Secured { default_key: false }));
        assert!(secured);
    }

    pd.card_read(RawCard {
        reader: 0,
        format: 1,
        bits: 26,
        data: vec![0x02, 0x02, 0x00, 0x40],
    });
    let v = peer.expect("card event", |v| v["event"].get("format").is_some());
    assert_eq!(v["event"]["length"], 26);
    assert_eq!(v["event"]["data"], "02020040");
    pd.keypad(0, b"987");
    let v = peer.expect("keypad event", |v| {
        v["event"].get("data") == Some(&json!("393837"))
    });
    assert_eq!(v["event"]["reader_no"], 0);

    for (req, expect) in [
        ("led", "led 2 30"),
        ("buzzer", "buzzer 3 1 2"),
        ("output", "output 0 4 50"),
    ] {
        peer.send(json!({ req: true }));
        peer.expect("submission", |v| v["submitted"] == req);
        let got = app_rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("pivgate PD: no {req}"));
        assert_eq!(got, expect);
    }
    peer.send(json!({"query": "status"}));
    let st = peer.expect("status", |v| v.get("online").is_some());
    assert_eq!(st["online"], true);
    drop(peer);
    pd.shutdown().unwrap();
}

#[test]
fn pivgate_pd_with_libosdp_cp_plain() {
    pivgate_pd_with_libosdp_cp(None);
}

#[test]
fn pivgate_pd_with_libosdp_cp_secure() {
    pivgate_pd_with_libosdp_cp(Some(Key(*b"0123456789abcdef")));
}

struct KeyStore(mpsc::Sender<String>);

impl PdApp for KeyStore {
    fn keyset(&mut self, key: &Key) -> bool {
        self.0.send(hex::encode(key.0)).is_ok()
    }
}

#[test]
fn libosdp_cp_installs_a_key_on_pivgate_pd_in_install_mode() {
    let pty = Pty::open().unwrap();
    let mut cfg = PdConfig::reader(
        12,
        links::osdp::msg::PdId {
            vendor: [1, 2, 3],
            model: 4,
            version: 5,
            serial: 0xBEEF,
            firmware: [1, 0, 0],
        },
    );
    cfg.install_mode = true;
    let (tx, keys) = mpsc::channel();
    let pd = PdHandle::spawn(
        pty.master.try_clone().unwrap(),
        PeripheralDevice::new(cfg),
        Box::new(KeyStore(tx)),
        Link::paced(115200),
    )
    .unwrap();
    let mut peer = start_peer(
        "libosdp_cp.py",
        &[
            "--device".into(),
            pty.slave_path.display().to_string(),
            "--address".into(),
            "12".into(),
            "--install-mode".into(),
            "--scbk".into(),
            "000102030405060708090a0b0c0d0e0f".into(),
        ],
    );
    let st = peer.expect("online status", |v| v.get("online").is_some());
    assert_eq!(st["online"], true);
    std::thread::sleep(Duration::from_millis(300));
    let seen: Vec<PdEvent> = pd.events().try_iter().collect();
    assert!(
        seen.contains(&PdEvent::Secured { default_key: true }),
        "{seen:?} {st}"
    );

    let new_key = "000102030405060708090a0b0c0d0e0f";
    peer.send(json!({ "keyset": new_key }));
    peer.expect("keyset submission", |v| {
        v["submitted"] == "keyset" && v["ok"] == true
    });
    assert_eq!(keys.recv_timeout(WAIT).unwrap(), new_key);
    // libosdp restarts the secure channel with the new key.
    let end = std::time::Instant::now() + WAIT;
    let mut rekeyed = false;
    while std::time::Instant::now() < end && !rekeyed {
        if let Ok(e) = pd.events().recv_timeout(Duration::from_millis(200)) {
            rekeyed = e == PdEvent::Secured { default_key: false };
        }
    }
    assert!(
        rekeyed,
        "the pivgate PD was not secured again with the installed key"
    );
    // libosdp marks its side active once it has checked our R-MAC_I; then
    // traffic continues over the new session.
    let end = std::time::Instant::now() + WAIT;
    let st = loop {
        peer.send(json!({"query": "status"}));
        let st = peer.expect("status", |v| v.get("online").is_some());
        if st["sc"] == true || std::time::Instant::now() > end {
            break st;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(300));
    let after: Vec<PdEvent> = pd.events().try_iter().collect();
    assert_eq!(st["online"], true, "{after:?}");
    assert_eq!(st["sc"], true, "{after:?}");
    assert!(after.is_empty(), "{after:?}");
    drop(peer);
    pd.shutdown().unwrap();
}
