//! CP and PD state machines driven in-process with an explicit clock: no
//! sleeping, no threads.

use std::time::{Duration, Instant};

use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, OfflineReason, PdSetup, Refusal};
use links::osdp::msg::{
    BuzzerControl, Command, LedControl, LedState, OutputControl, PdId, RawCard, Reply, XrdReply,
    XwrRequest,
};
use links::osdp::pd::{NoApp, PdApp, PdConfig, PeripheralDevice};
use links::osdp::sc::Key;

#[derive(Default)]
struct Recorder {
    outputs: Vec<OutputControl>,
    leds: Vec<LedControl>,
    buzzers: Vec<BuzzerControl>,
    keys: Vec<Key>,
}

impl PdApp for Recorder {
    fn output(&mut self, c: &OutputControl) {
        self.outputs.push(*c);
    }
    fn led(&mut self, c: &LedControl) {
        self.leds.push(*c);
    }
    fn buzzer(&mut self, c: &BuzzerControl) {
        self.buzzers.push(*c);
    }
    fn keyset(&mut self, key: &Key) -> bool {
        self.keys.push(key.clone());
        true
    }
    fn transparent(&mut self, r: &XwrRequest) -> Option<XrdReply> {
        match r {
            XwrRequest::Apdu { reader, apdu } => Some(XrdReply::Response {
                reader: *reader,
                status: 0,
                data: [&apdu[..], &[0x90, 0x00]].concat(),
            }),
            _ => None,
        }
    }
}

struct Bus {
    cp: ControlPanel,
    pds: Vec<(PeripheralDevice, Recorder, bool)>,
    now: Instant,
    events: Vec<CpEvent>,
}

impl Bus {
    fn new(cfg: CpConfig, setups: Vec<PdSetup>, pds: Vec<PdConfig>) -> Bus {
        Bus {
            cp: ControlPanel::new(cfg, setups),
            pds: pds
                .into_iter()
                .map(|c| (PeripheralDevice::new(c), Recorder::default(), true))
                .collect(),
            now: Instant::now(),
            events: vec![],
        }
    }

    /// Runs the bus for `d` of simulated time in 1 ms steps.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            let mut out = self.cp.handle_timeout(self.now);
            if out.is_none() {
                out = self.cp.poll_transmit(self.now);
            }
            if let Some(bytes) = out {
                for (pd, app, connected) in &mut self.pds {
                    if !*connected {
                        continue;
                    }
                    let reply = pd.receive(&bytes, app);
                    if !reply.is_empty() {
                        self.cp.receive(&reply, self.now);
                    }
                }
            }
            while let Some(e) = self.cp.poll_event() {
                self.events.push(e);
            }
            self.now += Duration::from_millis(1);
        }
    }

    fn take(&mut self) -> Vec<CpEvent> {
        std::mem::take(&mut self.events)
    }
}

fn id(serial: u32) -> PdId {
    PdId {
        vendor: [0x5C, 0x26, 0x23],
        model: 1,
        version: 2,
        serial,
        firmware: [1, 0, 0],
    }
}

#[test]
fn multidrop_connects_reads_cards_and_drives_outputs() {
    let mut bus = Bus::new(
        CpConfig::default(),
        vec![PdSetup::plain(1), PdSetup::plain(2)],
        vec![PdConfig::reader(1, id(11)), PdConfig::reader(2, id(22))],
    );
    bus.run(Duration::from_millis(100));
    let ev = bus.take();
    let online: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            CpEvent::Online {
                address,
                id,
                secure,
                ..
            } => Some((*address, id.serial, *secure)),
            _ => None,
        })
        .collect();
    assert_eq!(online, vec![(1, 11, false), (2, 22, false)]);

    bus.pds[1].0.card_read(RawCard {
        reader: 0,
        format: 1,
        bits: 26,
        data: vec![0x80, 0x80, 0x00, 0x40],
    });
    bus.pds[0].0.keypad(0, b"1234#");
    bus.pds[0].0.set_local_status(true, false);
    let out_ticket = bus
        .cp
        .submit(
            1,
            Command::Output(vec![OutputControl {
                output: 0,
                control_code: 4,
                timer: 30,
            }]),
        )
        .unwrap();
    let buz_ticket = bus
        .cp
        .submit(
            2,
            Command::Buzzer(BuzzerControl {
                reader: 0,
                tone: 2,
                on_time: 2,
                off_time: 1,
                count: 1,
            }),
        )
        .unwrap();
    let led = LedControl {
        reader: 0,
        led: 0,
        temporary: LedState {
            control_code: 2,
            on_time: 5,
            off_time: 0,
            on_color: 2,
            off_color: 0,
        },
        timer: 20,
        permanent: LedState {
            control_code: 1,
            on_time: 1,
            off_time: 0,
            on_color: 1,
            off_color: 0,
        },
    };
    bus.cp.submit(1, Command::Led(vec![led])).unwrap();
    bus.run(Duration::from_millis(300));
    let ev = bus.take();
    assert!(ev.contains(&CpEvent::Card {
        address: 2,
        card: RawCard {
            reader: 0,
            format: 1,
            bits: 26,
            data: vec![0x80, 0x80, 0x00, 0x40]
        }
    }));
    assert!(ev.contains(&CpEvent::Keypad {
        address: 1,
        reader: 0,
        keys: b"1234#".to_vec()
    }));
    assert!(ev.contains(&CpEvent::LocalStatus {
        address: 1,
        tamper: true,
        power: false
    }));
    assert!(ev.contains(&CpEvent::Completed {
        address: 1,
        command: 0x68,
        ticket: out_ticket,
        reply: Reply::Ack
    }));
    assert!(ev.contains(&CpEvent::Completed {
        address: 2,
        command: 0x6A,
        ticket: buz_ticket,
        reply: Reply::Ack
    }));
    assert_eq!(
        bus.pds[0].1.outputs,
        vec![OutputControl {
            output: 0,
            control_code: 4,
            timer: 30
        }]
    );
    assert_eq!(bus.pds[0].1.leds, vec![led]);
    assert_eq!(bus.pds[1].1.buzzers.len(), 1);
    assert!(bus.pds[1].1.outputs.is_empty());
}

#[test]
fn input_changes_are_reported_once_and_istat_answers_the_current_state() {
    let mut bus = Bus::new(
        CpConfig::default(),
        vec![PdSetup::plain(1)],
        vec![PdConfig::reader(1, id(11))],
    );
    bus.pds[0].0.set_inputs(vec![1, 0]);
    bus.run(Duration::from_millis(100));
    let istat = |ev: &[CpEvent]| -> Vec<Vec<u8>> {
        ev.iter()
            .filter_map(|e| match e {
                CpEvent::InputStatus { address: 1, inputs } => Some(inputs.clone()),
                _ => None,
            })
            .collect()
    };
    // The first state, reported once however many polls follow.
    assert_eq!(istat(&bus.take()), vec![vec![1, 0]]);
    // The door opens: one unsolicited report of the change.
    bus.pds[0].0.set_inputs(vec![0, 0]);
    bus.run(Duration::from_millis(300));
    assert_eq!(istat(&bus.take()), vec![vec![0, 0]]);
    // Asked, the device answers with the state it was given.
    let t = bus.cp.submit(1, Command::InputStatus).unwrap();
    bus.run(Duration::from_millis(100));
    assert!(bus.take().contains(&CpEvent::Completed {
        address: 1,
        command: 0x65,
        ticket: t,
        reply: Reply::InputStatus(vec![0, 0])
    }));
}

#[test]
fn offline_after_retries_then_reconnects() {
    let cfg = CpConfig::default();
    let mut bus = Bus::new(
        cfg,
        vec![PdSetup::plain(5)],
        vec![PdConfig::reader(5, id(5))],
    );
    bus.run(Duration::from_millis(50));
    assert!(bus.cp.is_online(5));
    bus.take();
    bus.pds[0].2 = false; // unplug
                          // Poll interval + (1 + retries) reply timeouts.
    bus.run(cfg.poll_interval + cfg.reply_timeout * (cfg.retries + 1) + Duration::from_millis(5));
    assert_eq!(
        bus.take(),
        vec![CpEvent::Offline {
            address: 5,
            reason: OfflineReason::NoReply
        }]
    );
    assert!(!bus.cp.is_online(5));
    assert_eq!(
        bus.cp.submit(5, Command::Poll),
        Err(links::osdp::cp::CpError::Offline(5))
    );
    bus.pds[0].2 = true; // plug back in
    bus.run(cfg.offline_retry + Duration::from_millis(50));
    assert!(bus
        .take()
        .iter()
        .any(|e| matches!(e, CpEvent::Online { address: 5, .. })));
}

#[test]
fn secure_channel_with_install_mode_then_keyset_then_scbk_d_refused() {
    let new_key = Key([0x11; 16]);
    let mut pdc = PdConfig::reader(9, id(9));
    pdc.install_mode = true;
    pdc.require_secure = true;
    let setup = PdSetup {
        address: 9,
        scbk: Some(new_key.clone()),
        install_mode: true,
    };
    let mut bus = Bus::new(CpConfig::default(), vec![setup], vec![pdc]);
    bus.run(Duration::from_millis(100));
    let ev = bus.take();
    assert!(ev.contains(&CpEvent::KeyInstalled { address: 9 }), "{ev:?}");
    assert!(ev.iter().any(|e| matches!(
        e,
        CpEvent::Online {
            address: 9,
            secure: true,
            ..
        }
    )));
    assert!(bus.cp.is_secure(9));
    assert_eq!(bus.pds[0].1.keys, vec![new_key.clone()]);
    assert!(!bus.pds[0].0.install_mode());

    // Encrypted traffic: a transparent APDU round trip.
    let apdu = vec![
        0x00, 0xA4, 0x04, 0x00, 0x09, 0xA0, 0, 0, 3, 8, 0, 0, 0x10, 0,
    ];
    let ticket = bus
        .cp
        .submit(
            9,
            Command::Transparent(XwrRequest::Apdu {
                reader: 0,
                apdu: apdu.clone(),
            }),
        )
        .unwrap();
    bus.run(Duration::from_millis(60));
    let ev = bus.take();
    assert!(ev.contains(&CpEvent::Completed {
        address: 9,
        command: 0xA1,
        ticket,
        reply: Reply::Transparent(XrdReply::Response {
            reader: 0,
            status: 0,
            data: [&apdu[..], &[0x90, 0x00]].concat()
        })
    }));

    // A panel that still tries SCBK-D is refused now that install mode is over.
    let mut cp2 = ControlPanel::new(
        CpConfig::default(),
        vec![PdSetup {
            address: 9,
            scbk: Some(Key([0x22; 16])),
            install_mode: true,
        }],
    );
    std::mem::swap(&mut bus.cp, &mut cp2);
    bus.run(Duration::from_millis(100));
    let ev = bus.take();
    assert!(
        ev.iter().any(|e| matches!(
            e,
            CpEvent::Refused {
                address: 9,
                reason: Refusal::HandshakeRefused(_)
            }
        )),
        "{ev:?}"
    );
    assert!(!bus.cp.is_online(9));
}

#[test]
fn wrong_key_is_refused_and_reported() {
    let mut pdc = PdConfig::reader(3, id(3));
    pdc.scbk = Some(Key([0x33; 16]));
    let mut bus = Bus::new(
        CpConfig::default(),
        vec![PdSetup::secure(3, Key([0x44; 16]))],
        vec![pdc],
    );
    bus.run(Duration::from_millis(60));
    let ev = bus.take();
    assert!(
        ev.contains(&CpEvent::Refused {
            address: 3,
            reason: Refusal::Cryptogram
        }),
        "{ev:?}"
    );
    assert!(!bus.cp.is_online(3));
}

#[test]
fn tampered_secure_packet_fails_the_mac_and_the_reader_is_refused() {
    let key = Key([0x55; 16]);
    let mut pdc = PdConfig::reader(4, id(4));
    pdc.scbk = Some(key.clone());
    let mut cp = ControlPanel::new(CpConfig::default(), vec![PdSetup::secure(4, key)]);
    let mut pd = PeripheralDevice::new(pdc);
    let mut app = Recorder::default();
    let mut now = Instant::now();
    for _ in 0..50 {
        if let Some(b) = cp.poll_transmit(now) {
            let r = pd.receive(&b, &mut app);
            cp.receive(&r, now);
        }
        now += Duration::from_millis(10);
    }
    assert!(cp.is_secure(4));
    while cp.poll_event().is_some() {}
    pd.card_read(RawCard {
        reader: 0,
        format: 0,
        bits: 8,
        data: vec![0xAB],
    });
    // Flip one data bit of the PD's secured reply and fix up the CRC, so only the MAC can catch it.
    let b = loop {
        if let Some(b) = cp.poll_transmit(now) {
            break b;
        }
        now += Duration::from_millis(10);
    };
    let mut r = pd.receive(&b, &mut app);
    let n = r.len();
    r[n - 8] ^= 0x01;
    let crc = links::osdp::codec::crc16(&r[..n - 2]).to_le_bytes();
    r[n - 2] = crc[0];
    r[n - 1] = crc[1];
    cp.receive(&r, now);
    let ev: Vec<_> = std::iter::from_fn(|| cp.poll_event()).collect();
    assert!(
        ev.iter().any(|e| matches!(
            e,
            CpEvent::Refused {
                address: 4,
                reason: Refusal::Mac(_)
            }
        )),
        "{ev:?}"
    );
    assert!(!ev.iter().any(|e| matches!(e, CpEvent::Card { .. })));
    assert!(!cp.is_online(4));
}

#[test]
fn reply_timeout_runs_from_the_end_of_transmission() {
    let cfg = CpConfig::default();
    let mut cp = ControlPanel::new(cfg, vec![PdSetup::plain(1)]);
    let t0 = Instant::now();
    assert!(cp.poll_transmit(t0).is_some());
    // A slow line: the command took 150 ms to leave.
    let sent = t0 + Duration::from_millis(150);
    cp.transmitted(sent);
    assert!(cp
        .handle_timeout(sent + cfg.reply_timeout - Duration::from_millis(1))
        .is_none());
    assert_eq!(cp.next_deadline(sent), sent + cfg.reply_timeout);
    // No reply: the same bytes go out again (same sequence number).
    let first = cp.handle_timeout(sent + cfg.reply_timeout);
    assert!(first.is_some());
    // A reply that starts arriving extends the wait for its remainder.
    let t1 = sent + cfg.reply_timeout + Duration::from_millis(190);
    cp.receive(&[0x53, 0x81, 0x0A], t1);
    assert!(cp.handle_timeout(t1 + Duration::from_millis(20)).is_none());
}

#[test]
fn pd_resends_its_reply_to_a_repeated_sequence_number_and_naks_a_skipped_one() {
    use links::osdp::codec::Frame;
    let mut pd = PeripheralDevice::new(PdConfig::reader(1, id(1)));
    let mut app = Recorder::default();
    let send = |pd: &mut PeripheralDevice, app: &mut Recorder, sqn: u8, code: u8, data: Vec<u8>| {
        let bytes = Frame::new(1, false, sqn, code, data).encode().unwrap();
        Frame::decode(&pd.receive(&bytes, app)).unwrap()
    };
    assert_eq!(send(&mut pd, &mut app, 0, 0x61, vec![0]).code, 0x45);
    pd.card_read(RawCard {
        reader: 0,
        format: 0,
        bits: 8,
        data: vec![1],
    });
    let first = send(&mut pd, &mut app, 1, 0x60, vec![]);
    assert_eq!(first.code, 0x50);
    // The panel missed the reply and asks again with the same number: the card
    // read is sent again, not lost and not replaced by an ACK.
    assert_eq!(send(&mut pd, &mut app, 1, 0x60, vec![]), first);
    // Skipping a number is refused with NAK 4.
    let nak = send(&mut pd, &mut app, 3, 0x60, vec![]);
    assert_eq!((nak.code, nak.data.clone()), (0x41, vec![4]));
    // Unknown commands and bad lengths get their own NAK reasons.
    let r = send(&mut pd, &mut app, 0, 0x7E, vec![]);
    assert_eq!((r.code, r.data), (0x41, vec![3]));
    let r = send(&mut pd, &mut app, 1, 0x6A, vec![1, 2]);
    assert_eq!((r.code, r.data), (0x41, vec![2]));
    // Packets for another address, and replies, are not answered.
    let other = Frame::new(2, false, 2, 0x60, vec![]).encode().unwrap();
    assert!(pd.receive(&other, &mut app).is_empty());
    let reply = Frame::new(1, true, 2, 0x40, vec![]).encode().unwrap();
    assert!(pd.receive(&reply, &mut app).is_empty());
}

#[test]
fn secure_pd_refuses_plaintext_commands_and_scbk_d_outside_install_mode() {
    use links::osdp::codec::{Frame, Scb};
    let mut cfg = PdConfig::reader(1, id(1));
    cfg.scbk = Some(Key([1; 16]));
    cfg.require_secure = true;
    let mut pd = PeripheralDevice::new(cfg);
    let mut app = Recorder::default();
    let out = |bytes: Vec<u8>| Frame::decode(&bytes).unwrap();
    let poll = Frame::new(1, false, 0, 0x60, vec![]).encode().unwrap();
    let r = out(pd.receive(&poll, &mut app));
    assert_eq!((r.code, r.data), (0x41, vec![6]));
    let mut chlng = Frame::new(1, false, 1, 0x76, vec![0; 8]);
    chlng.scb = Some(Scb {
        kind: 0x11,
        data: vec![0],
    });
    let r = out(pd.receive(&chlng.encode().unwrap(), &mut app));
    assert_eq!((r.code, r.data), (0x41, vec![6]));
}

#[test]
fn a_refused_reader_does_not_disturb_the_others_on_the_bus() {
    let good = Key([0x61; 16]);
    let mut pd1 = PdConfig::reader(1, id(1));
    pd1.scbk = Some(Key([0x62; 16])); // not the key the panel holds
    let mut pd2 = PdConfig::reader(2, id(2));
    pd2.scbk = Some(good.clone());
    let mut bus = Bus::new(
        CpConfig::default(),
        vec![
            PdSetup::secure(1, good.clone()),
            PdSetup::secure(2, good),
            PdSetup::plain(3),
        ],
        vec![pd1, pd2, PdConfig::reader(3, id(3))],
    );
    bus.run(Duration::from_millis(200));
    let ev = bus.take();
    assert!(
        ev.contains(&CpEvent::Refused {
            address: 1,
            reason: Refusal::Cryptogram
        }),
        "{ev:?}"
    );
    assert!(bus.cp.is_secure(2));
    assert!(bus.cp.is_online(3));
    // Garbage on the line is counted and skipped.
    bus.cp
        .receive(&[0x53, 0x99, 0x02, 0x00, 0x00, 0x12, 0x34], bus.now);
    bus.pds[1].0.card_read(RawCard {
        reader: 0,
        format: 1,
        bits: 26,
        data: vec![1, 2, 3, 0x40],
    });
    bus.pds[2].0.keypad(0, b"5");
    bus.run(Duration::from_millis(200));
    let ev = bus.take();
    assert!(
        ev.iter().any(|e| matches!(e, CpEvent::BadFrame(_))),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, CpEvent::Card { address: 2, .. })),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, CpEvent::Keypad { address: 3, .. })),
        "{ev:?}"
    );
    assert!(bus.cp.decoder_stats().bad_frames >= 1);
    assert!(bus.cp.is_secure(2) && bus.cp.is_online(3) && !bus.cp.is_online(1));
}

#[test]
fn a_device_that_loses_its_session_is_reconnected_and_secured_again() {
    let key = Key([0x71; 16]);
    let mut pdc = PdConfig::reader(6, id(6));
    pdc.scbk = Some(key.clone());
    let mut bus = Bus::new(
        CpConfig::default(),
        vec![PdSetup::secure(6, key)],
        vec![pdc],
    );
    bus.run(Duration::from_millis(100));
    assert!(bus.cp.is_secure(6));
    bus.take();
    // The reader restarts (power cycle): it has no session any more.
    let mut cfg = PdConfig::reader(6, id(6));
    cfg.scbk = Some(Key([0x71; 16]));
    bus.pds[0].0 = PeripheralDevice::new(cfg);
    bus.run(Duration::from_millis(200));
    let ev = bus.take();
    assert!(
        ev.contains(&CpEvent::Offline {
            address: 6,
            reason: OfflineReason::SessionLost
        }),
        "{ev:?}"
    );
    assert!(
        ev.iter().any(|e| matches!(
            e,
            CpEvent::Online {
                address: 6,
                secure: true,
                ..
            }
        )),
        "{ev:?}"
    );
    assert!(bus.cp.is_secure(6));
}

#[test]
fn a_transparent_apdu_may_take_as_long_as_a_card_operation() {
    let cfg = CpConfig::default();
    let mut bus = Bus::new(
        cfg,
        vec![PdSetup::plain(1)],
        vec![PdConfig::reader(1, id(1))],
    );
    bus.run(Duration::from_millis(60));
    assert!(bus.cp.is_online(1));
    bus.cp
        .submit(
            1,
            Command::Transparent(XwrRequest::Apdu {
                reader: 0,
                apdu: vec![0, 0x87, 0x11, 0x9A],
            }),
        )
        .unwrap();
    // Take the APDU off the line but let the "card" think for a second.
    let t0 = bus.now + Duration::from_millis(100);
    let mut sent = None;
    let mut t = bus.now;
    while sent.is_none() {
        sent = bus.cp.poll_transmit(t).filter(|b| b[5] == 0xA1);
        t += Duration::from_millis(1);
    }
    bus.cp.transmitted(t0);
    assert!(bus
        .cp
        .handle_timeout(t0 + Duration::from_millis(1000))
        .is_none());
    assert_eq!(bus.cp.next_deadline(t0), t0 + cfg.transparent_timeout);
    // A poll still times out at the standard's 200 ms.
    assert_eq!(cfg.reply_timeout, Duration::from_millis(200));
}

#[test]
fn pd_answers_a_checksum_command_with_a_checksum() {
    use links::osdp::codec::Frame;
    let mut pd = PeripheralDevice::new(PdConfig::reader(1, id(1)));
    let mut f = Frame::new(1, false, 0, 0x61, vec![0]);
    f.crc = false;
    let r = Frame::decode(&pd.receive(&f.encode().unwrap(), &mut NoApp)).unwrap();
    assert!(!r.crc);
    assert_eq!(r.code, 0x45);
    let r = Frame::decode(&pd.receive(
        &Frame::new(1, false, 1, 0x60, vec![]).encode().unwrap(),
        &mut NoApp,
    ))
    .unwrap();
    assert!(r.crc);
}
