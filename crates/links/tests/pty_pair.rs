//! pivgate CP ↔ pivgate PD over a pseudo-terminal pair, paced like a serial
//! line: secure channel from install mode and transparent smart-card APDUs
//! (`osdp_XWR` / `osdp_XRD`), and each device's share of the line counters
//! on a bus where the panel also polls a device that is not there.

use std::time::Duration;

use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, PdSetup};
use links::osdp::msg::{Command, PdId, Reply, XrdReply, XwrRequest};
use links::osdp::pd::{PdApp, PdConfig, PeripheralDevice};
use links::osdp::sc::Key;
use links::serial::{open_serial, wire_time, CpHandle, Link, PdHandle, Pty};

const WAIT: Duration = Duration::from_secs(15);

/// A card behind the reader: answers SELECT with a canned FCI, anything else
/// with its own bytes reversed, and reports a card on scan.
struct Card;

impl PdApp for Card {
    fn transparent(&mut self, r: &XwrRequest) -> Option<XrdReply> {
        Some(match r {
            XwrRequest::GetMode => XrdReply::Mode { mode: 1, config: 0 },
            XwrRequest::SetMode { mode, config } => XrdReply::Mode {
                mode: *mode,
                config: *config,
            },
            XwrRequest::Scan { reader } => XrdReply::CardPresent {
                reader: *reader,
                status: 1,
            },
            XwrRequest::Done { reader } => XrdReply::CardPresent {
                reader: *reader,
                status: 0,
            },
            XwrRequest::Apdu { reader, apdu } if apdu.get(1) == Some(&0xA4) => XrdReply::Response {
                reader: *reader,
                status: 0,
                data: vec![0x61, 0x03, 0x4F, 0x01, 0x00, 0x90, 0x00],
            },
            XwrRequest::Apdu { reader, apdu } => XrdReply::Response {
                reader: *reader,
                status: 0,
                data: apdu.iter().rev().copied().chain([0x90, 0x00]).collect(),
            },
        })
    }
}

fn transparent(cp: &CpHandle, address: u8, req: XwrRequest) -> XrdReply {
    cp.submit(address, Command::Transparent(req)).unwrap();
    match cp.wait_for(WAIT, |e| {
        matches!(e, CpEvent::Completed { command: 0xA1, .. })
    }) {
        Some(CpEvent::Completed {
            reply: Reply::Transparent(x),
            ..
        }) => x,
        other => panic!("no transparent reply: {other:?}"),
    }
}

fn run(baud: u32) {
    let pty = Pty::open().unwrap();
    let key = Key([0x5A; 16]);
    let mut cfg = PdConfig::reader(
        7,
        PdId {
            vendor: [0xA, 0xB, 0xC],
            model: 1,
            version: 1,
            serial: 77,
            firmware: [0, 1, 0],
        },
    );
    cfg.install_mode = true;
    cfg.require_secure = true;
    // The reader opens its side by path, as it would a serial device.
    let port = open_serial(&pty.slave_path, baud).unwrap();
    let pd = PdHandle::spawn(
        port,
        PeripheralDevice::new(cfg),
        Box::new(Card),
        Link::paced(baud),
    )
    .unwrap();
    let cp = ControlPanel::new(
        CpConfig::default(),
        vec![
            PdSetup {
                address: 7,
                scbk: Some(key),
                install_mode: true,
            },
            // Configured but absent: polled, never answering.
            PdSetup::plain(9),
        ],
    );
    let cp = CpHandle::spawn(pty.master.try_clone().unwrap(), cp, Link::paced(baud)).unwrap();
    let online = cp.wait_for(WAIT, |e| matches!(e, CpEvent::Online { .. }));
    assert!(
        matches!(
            online,
            Some(CpEvent::Online {
                address: 7,
                secure: true,
                ..
            })
        ),
        "{online:?}"
    );

    assert_eq!(
        transparent(&cp, 7, XwrRequest::Scan { reader: 0 }),
        XrdReply::CardPresent {
            reader: 0,
            status: 1
        }
    );
    let select = vec![
        0x00, 0xA4, 0x04, 0x00, 0x09, 0xA0, 0x00, 0x00, 0x03, 0x08, 0x00, 0x00, 0x10, 0x00, 0x00,
    ];
    assert_eq!(
        transparent(
            &cp,
            7,
            XwrRequest::Apdu {
                reader: 0,
                apdu: select
            }
        ),
        XrdReply::Response {
            reader: 0,
            status: 0,
            data: vec![0x61, 0x03, 0x4F, 0x01, 0x00, 0x90, 0x00]
        }
    );
    // A GENERAL AUTHENTICATE-sized APDU (a 32-byte challenge inside its template).
    let mut ga = vec![
        0x00, 0x87, 0x11, 0x9A, 0x26, 0x7C, 0x24, 0x82, 0x00, 0x81, 0x20,
    ];
    ga.extend(0u8..32);
    ga.push(0x00);
    let mut expect: Vec<u8> = ga.iter().rev().copied().collect();
    expect.extend([0x90, 0x00]);
    assert_eq!(
        transparent(
            &cp,
            7,
            XwrRequest::Apdu {
                reader: 0,
                apdu: ga
            }
        ),
        XrdReply::Response {
            reader: 0,
            status: 0,
            data: expect
        }
    );
    assert_eq!(
        transparent(&cp, 7, XwrRequest::Done { reader: 0 }),
        XrdReply::CardPresent {
            reader: 0,
            status: 0
        }
    );

    let counters = cp.commander();
    let cp_stats = cp.shutdown().unwrap();
    let pd_stats = pd.shutdown().unwrap();
    assert_eq!(
        cp_stats.tx_wire_time,
        wire_time(cp_stats.tx_bytes as usize, baud)
    );
    assert_eq!(pd_stats.rx_bytes, cp_stats.tx_bytes);
    assert_eq!(cp_stats.rx_bytes, pd_stats.tx_bytes);

    // Every packet went to one of the two devices; the reader's share
    // leaves out the polls of the absent one.
    let (seven, nine) = (counters.device_line_stats(7), counters.device_line_stats(9));
    assert_eq!(seven.tx_bytes + nine.tx_bytes, cp_stats.tx_bytes);
    assert!(nine.tx_bytes > 0, "{nine:?}");
    assert!(seven.rx_bytes > 0 && seven.rx_bytes + nine.rx_bytes <= cp_stats.rx_bytes);
    assert_eq!(seven.tx_wire_time, wire_time(seven.tx_bytes as usize, baud));
    assert!(seven.wire_time() < cp_stats.wire_time());
}

#[test]
fn transparent_apdus_over_a_secure_link_at_115200() {
    run(115200);
}

#[test]
fn transparent_apdus_over_a_secure_link_at_9600() {
    run(9600);
}

/// The other side of the line goes away (the adapter is unplugged, the
/// pseudo-terminal's controlling side closes): the device's and the panel's
/// threads end with an error instead of spinning on end-of-file.
#[test]
fn end_of_file_on_the_line_ends_the_threads() {
    let pty = Pty::open().unwrap();
    let pd = PdHandle::spawn(
        pty.slave,
        PeripheralDevice::new(PdConfig::reader(1, PdId::default())),
        Box::new(Card),
        Link::paced(115200),
    )
    .unwrap();
    drop(pty.master);
    // The event channel closes when the thread ends; the bound only keeps a
    // regression from hanging the test run.
    let r = pd.events().recv_timeout(Duration::from_secs(60));
    assert!(
        matches!(r, Err(std::sync::mpsc::RecvTimeoutError::Disconnected)),
        "{r:?}"
    );
    let e = pd.shutdown().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");

    let pty = Pty::open().unwrap();
    let cp = CpHandle::spawn(
        pty.slave,
        ControlPanel::new(CpConfig::default(), vec![PdSetup::plain(1)]),
        Link::paced(115200),
    )
    .unwrap();
    drop(pty.master);
    let r = cp.events().recv_timeout(Duration::from_secs(60));
    let r = match r {
        // A panel may first report what it saw (no reply) before the end.
        Ok(_) => loop {
            match cp.events().recv_timeout(Duration::from_secs(60)) {
                Ok(_) => continue,
                Err(e) => break Err(e),
            }
        },
        r => r,
    };
    assert!(
        matches!(r, Err(std::sync::mpsc::RecvTimeoutError::Disconnected)),
        "{r:?}"
    );
    assert!(cp.shutdown().is_err());
}
