//! PKI-CAK run by the controller through an OSDP reader in transparent mode:
//! pivgate CP ↔ pivgate PD over a pseudo-terminal pair paced at 9600 and
//! 115200 baud,
//! secure channel up, the PD relaying APDUs to a software PIV card. The same
//! mechanism and fast path as over PC/SC, and the link time is measured.

use std::time::Duration;

use auth::{Authenticator, Mechanism, PathTaken, Settings};
use card::Card;
use host::InProcess;
use links::loopback::Loopback;
use links::osdp::cp::CpEvent;
use links::osdp::sc::Key;
use links::serial::wire_time;
use links::transparent::{CardBridge, OsdpTransport};
use pki_issue::{CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};

fn pki_cak_through_an_osdp_reader(baud: u32) {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let creds = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    let card = Box::new(InProcess::new(Card::new(
        creds.card_image(Some(5)).unwrap(),
    )));
    let Loopback {
        panel: cp,
        reader: pd,
        line: _line,
        ..
    } = Loopback::start(card, 3, baud, Key([0x42; 16])).unwrap();

    // The reader tells the panel a card arrived, in answer to a poll.
    pd.card_presence(0, true);
    let presence = cp.wait_for(Duration::from_secs(10), |e| {
        matches!(e, CpEvent::CardPresence { .. })
    });
    assert_eq!(
        presence,
        Some(CpEvent::CardPresence {
            address: 3,
            reader: 0,
            present: true
        })
    );

    let mut transport = OsdpTransport::new(cp, 3, 0);
    let authn = Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        Settings::default(),
    );

    let before = transport.line_stats();
    let full = authn.authenticate(&mut transport, Mechanism::PkiCak, None, None);
    assert!(full.outcome.granted(), "refused: {:?}", full.outcome);
    assert_eq!(full.path, PathTaken::Full);
    let full_line = transport.line_stats().since(&before);
    // The transaction carries the line time of its own exchange.
    let link = Duration::from_micros(full.link_us.expect("an OSDP tap knows its line time"));
    assert!(
        link > Duration::ZERO && link <= full_line.wire_time(),
        "{link:?}"
    );
    let full_apdu = full.total();

    let before = transport.line_stats();
    let fast = authn.authenticate(&mut transport, Mechanism::PkiCak, None, None);
    assert!(fast.outcome.granted(), "refused: {:?}", fast.outcome);
    assert_eq!(fast.path, PathTaken::Fast);
    let fast_line = transport.line_stats().since(&before);
    let fast_apdu = fast.total();

    // The fast path moves far fewer APDU bytes, and the OSDP line carries
    // each APDU plus framing, security block, MAC and padding.
    assert!(fast_apdu.apdus <= 3, "{fast_apdu:?}");
    assert!(full_apdu.bytes_in > 700);
    assert!(fast_line.rx_bytes < full_line.rx_bytes);
    assert!(full_line.rx_bytes >= full_apdu.bytes_in);
    // Line time is the bytes at 10 bits each (to the nanosecond rounding of
    // two snapshots).
    let model = wire_time(full_line.rx_bytes as usize, baud);
    assert!(full_line.rx_wire_time.abs_diff(model) <= Duration::from_nanos(1));
    eprintln!(
        "PKI-CAK over OSDP at {baud} baud: full read {} APDUs, {} B line ({:?} line time); fast path {} APDUs, {} B line ({:?})",
        full_apdu.apdus,
        full_line.tx_bytes + full_line.rx_bytes,
        full_line.wire_time(),
        fast_apdu.apdus,
        fast_line.tx_bytes + fast_line.rx_bytes,
        fast_line.wire_time(),
    );
    transport.into_inner().shutdown().unwrap();
    pd.shutdown().unwrap();
}

#[test]
fn pki_cak_through_an_osdp_reader_at_115200_baud() {
    pki_cak_through_an_osdp_reader(115200);
}

#[test]
fn pki_cak_through_an_osdp_reader_at_9600_baud() {
    // Reply frames of a certificate read hold a 9600-baud line for longer
    // than the 200 ms reply timeout: the panel must wait for a reply that is
    // arriving rather than retransmit.
    pki_cak_through_an_osdp_reader(9600);
}

#[test]
fn card_bridge_relays_for_its_reader_only_and_reports_a_missing_card() {
    use links::osdp::msg::{XrdReply, XwrRequest};
    use links::osdp::pd::PdApp;
    use links::transparent::status;

    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let creds = pki.issue_card(&CardOptions::default()).unwrap();
    let image = creds.card_image(Some(9)).unwrap();
    let select = vec![
        0x00, 0xA4, 0x04, 0x00, 0x09, 0xA0, 0, 0, 3, 8, 0, 0, 0x10, 0, 0x00,
    ];

    let mut bridge = CardBridge::new(Box::new(InProcess::new(Card::new(image.clone()))), 0);
    match bridge.transparent(&XwrRequest::Apdu {
        reader: 0,
        apdu: select.clone(),
    }) {
        Some(XrdReply::Response {
            reader: 0,
            status: status::OK,
            data,
        }) => {
            assert_eq!(&data[data.len() - 2..], &[0x90, 0x00]);
        }
        other => panic!("{other:?}"),
    }
    // Another reader number, or extended mode 0, is not relayed (NAK).
    assert_eq!(
        bridge.transparent(&XwrRequest::Apdu {
            reader: 1,
            apdu: select.clone()
        }),
        None
    );
    assert_eq!(
        bridge.transparent(&XwrRequest::SetMode { mode: 0, config: 0 }),
        Some(XrdReply::Mode { mode: 0, config: 0 })
    );
    assert_eq!(
        bridge.transparent(&XwrRequest::Apdu {
            reader: 0,
            apdu: select.clone()
        }),
        None
    );

    let mut removed = InProcess::new(Card::new(image));
    removed.remove();
    let mut bridge = CardBridge::new(Box::new(removed), 0);
    assert_eq!(
        bridge.transparent(&XwrRequest::Apdu {
            reader: 0,
            apdu: select
        }),
        Some(XrdReply::Response {
            reader: 0,
            status: status::NO_CARD,
            data: vec![]
        })
    );
}

/// A bus whose panel answers each transparent request at once, after a late
/// answer to an exchange given up earlier is already waiting in the events.
struct LateAnswerBus {
    tx: std::sync::mpsc::Sender<CpEvent>,
    rx: std::sync::mpsc::Receiver<CpEvent>,
    tickets: std::cell::Cell<u64>,
}

impl links::transparent::Bus for LateAnswerBus {
    fn submit(
        &self,
        address: u8,
        command: links::osdp::msg::Command,
    ) -> Result<links::osdp::cp::Ticket, links::osdp::cp::CpError> {
        use links::osdp::msg::{Command, Reply, XrdReply, XwrRequest};
        let Command::Transparent(XwrRequest::Apdu { reader, apdu }) = command else {
            panic!("unexpected {command:?}");
        };
        // The answer to a request given up on, still on its way.
        self.tx
            .send(CpEvent::Completed {
                address,
                command: 0xA1,
                ticket: self.tickets.get(),
                reply: Reply::Transparent(XrdReply::Response {
                    reader,
                    status: 0,
                    data: vec![0xDE, 0xAD, 0x90, 0x00],
                }),
            })
            .unwrap();
        let ticket = self.tickets.get() + 1;
        self.tickets.set(ticket + 1);
        self.tx
            .send(CpEvent::Completed {
                address,
                command: 0xA1,
                ticket,
                reply: Reply::Transparent(XrdReply::Response {
                    reader,
                    status: 0,
                    data: [&apdu[..], &[0x90, 0x00]].concat(),
                }),
            })
            .unwrap();
        Ok(ticket)
    }
    fn events(&self) -> &std::sync::mpsc::Receiver<CpEvent> {
        &self.rx
    }
    fn line_stats(&self, _address: u8) -> links::serial::LineStats {
        links::serial::LineStats::default()
    }
}

#[test]
fn a_late_answer_is_not_taken_for_the_next_apdus() {
    use host::Channel;
    let (tx, rx) = std::sync::mpsc::channel();
    let bus = LateAnswerBus {
        tx,
        rx,
        tickets: std::cell::Cell::new(1),
    };
    let mut t = OsdpTransport::new(bus, 1, 0);
    for apdu in [[0x00u8, 0xB0, 0, 0, 1], [0x00, 0xB0, 0, 1, 2]] {
        let got = t.transmit(&apdu).unwrap();
        assert_eq!(got, [&apdu[..], &[0x90, 0x00]].concat());
    }
}
