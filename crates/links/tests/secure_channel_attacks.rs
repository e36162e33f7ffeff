//! Forged packets against the CP and PD state machines: security blocks that
//! do not belong to their message, plaintext data before the session is
//! secure, downgrades, stalls, `osdp_BUSY` and install mode.

use std::time::{Duration, Instant};

use links::osdp::codec::{scs, Frame, Scb};
use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, OfflineReason, PdSetup, Refusal};
use links::osdp::msg::{cmd, reply, Command, OutputControl, PdId, Reply, XrdReply, XwrRequest};
use links::osdp::pd::{PdApp, PdConfig, PeripheralDevice};
use links::osdp::sc::Key;

#[derive(Default)]
struct Rec {
    outs: Vec<OutputControl>,
    keys: Vec<Key>,
}

impl PdApp for Rec {
    fn output(&mut self, c: &OutputControl) {
        self.outs.push(*c);
    }
    fn keyset(&mut self, k: &Key) -> bool {
        self.keys.push(k.clone());
        true
    }
    fn transparent(&mut self, _r: &XwrRequest) -> Option<XrdReply> {
        None
    }
}

fn id() -> PdId {
    PdId {
        vendor: [1, 2, 3],
        model: 1,
        version: 1,
        serial: 7,
        firmware: [1, 0, 0],
    }
}

const KEY: Key = Key([0x11; 16]);

/// A CP and a PD that completed the handshake with each other.
struct Pair {
    cp: ControlPanel,
    pd: PeripheralDevice,
    app: Rec,
    now: Instant,
    /// The sequence number of the last command the CP sent.
    last: u8,
    events: Vec<CpEvent>,
}

impl Pair {
    fn new(setup: PdSetup, cfg: PdConfig) -> Pair {
        Pair {
            cp: ControlPanel::new(CpConfig::default(), vec![setup]),
            pd: PeripheralDevice::new(cfg),
            app: Rec::default(),
            now: Instant::now(),
            last: 0,
            events: vec![],
        }
    }

    fn secure(require_secure: bool) -> Pair {
        let mut cfg = PdConfig::reader(1, id());
        cfg.scbk = Some(KEY);
        cfg.require_secure = require_secure;
        let mut p = Pair::new(PdSetup::secure(1, KEY), cfg);
        assert!(p.run_until(|p| p.cp.is_secure(1)), "never secure");
        assert!(p.pd.is_secure());
        p
    }

    /// One millisecond of bus time; `deliver` decides whether the CP hears the reply.
    fn step(&mut self, deliver: &mut dyn FnMut(&Frame) -> bool) {
        let mut out = self.cp.handle_timeout(self.now);
        if out.is_none() {
            out = self.cp.poll_transmit(self.now);
        }
        if let Some(b) = out {
            let c = Frame::decode(&b).unwrap();
            self.last = c.sqn;
            let r = self.pd.receive(&b, &mut self.app);
            if !r.is_empty() && deliver(&c) {
                self.cp.receive(&r, self.now);
            }
        }
        while let Some(e) = self.cp.poll_event() {
            self.events.push(e);
        }
        self.now += Duration::from_millis(1);
    }

    fn run_until(&mut self, done: impl Fn(&Pair) -> bool) -> bool {
        for _ in 0..5000 {
            self.step(&mut |_| true);
            if done(self) {
                return true;
            }
        }
        false
    }

    /// The next command the CP puts on the line (the PD does not hear it).
    fn next_command(&mut self) -> Frame {
        for _ in 0..1000 {
            if let Some(b) = self.cp.poll_transmit(self.now) {
                return Frame::decode(&b).unwrap();
            }
            self.now += Duration::from_millis(1);
        }
        panic!("the panel sends nothing");
    }

    fn cp_events(&mut self) -> Vec<CpEvent> {
        while let Some(e) = self.cp.poll_event() {
            self.events.push(e);
        }
        std::mem::take(&mut self.events)
    }
}

fn next(s: u8) -> u8 {
    if s >= 3 {
        1
    } else {
        s + 1
    }
}

fn with_scb(mut f: Frame, kind: u8) -> Vec<u8> {
    f.scb = Some(Scb {
        kind,
        data: vec![1],
    });
    f.encode().unwrap()
}

const HANDSHAKE_BLOCKS: [u8; 4] = [scs::SCS_11, scs::SCS_12, scs::SCS_13, scs::SCS_14];

#[test]
fn pd_refuses_an_output_without_mac_behind_any_handshake_block_in_a_session() {
    for kind in HANDSHAKE_BLOCKS {
        let mut p = Pair::secure(true);
        let f = Frame::new(1, false, next(p.last), cmd::OUT, vec![0, 2, 0, 0]);
        let reply = p.pd.receive(&with_scb(f, kind), &mut p.app);
        assert!(
            p.app.outs.is_empty(),
            "block {kind:#x}: the device ran an osdp_OUT without a MAC: {:?}",
            p.app.outs
        );
        let r = Frame::decode(&reply).unwrap();
        assert_eq!(r.code, reply::NAK, "block {kind:#x}");
        assert!(!p.pd.is_secure(), "block {kind:#x}: the session survived");
    }
}

#[test]
fn pd_refuses_a_keyset_without_mac_behind_any_handshake_block_in_a_session() {
    for kind in HANDSHAKE_BLOCKS {
        let mut p = Pair::secure(true);
        let mut data = vec![1, 16];
        data.extend_from_slice(&[0xAA; 16]);
        let f = Frame::new(1, false, next(p.last), cmd::KEYSET, data);
        let _ = p.pd.receive(&with_scb(f, kind), &mut p.app);
        assert!(
            p.app.keys.is_empty(),
            "block {kind:#x}: installed an attacker's key"
        );
        assert_eq!(p.pd.scbk(), Some(&KEY), "block {kind:#x}");
    }
}

#[test]
fn pd_refuses_a_server_cryptogram_outside_a_handshake_and_a_challenge_ends_the_session() {
    let mut p = Pair::secure(true);
    let f = Frame::new(1, false, next(p.last), cmd::SCRYPT, vec![0; 16]);
    let reply = p.pd.receive(&with_scb(f, scs::SCS_13), &mut p.app);
    assert_eq!(Frame::decode(&reply).unwrap().code, reply::NAK);
    assert!(!p.pd.is_secure());

    let mut p = Pair::secure(true);
    let f = Frame::new(1, false, next(p.last), cmd::CHLNG, vec![7; 8]);
    let reply = p.pd.receive(&with_scb(f, scs::SCS_11), &mut p.app);
    assert_eq!(Frame::decode(&reply).unwrap().code, reply::CCRYPT);
    assert!(
        !p.pd.is_secure(),
        "a challenge must end the running session"
    );
    // What followed the session is plaintext and refused.
    let f = Frame::new(1, false, next(next(p.last)), cmd::OUT, vec![0, 2, 0, 0]);
    let _ = p.pd.receive(&f.encode().unwrap(), &mut p.app);
    assert!(p.app.outs.is_empty());
}

#[test]
fn cp_refuses_a_reply_without_mac_behind_any_handshake_block_in_a_session() {
    let card = vec![0, 1, 26, 0, 0xde, 0xad, 0xbe, 0xc0];
    let forged = [
        (reply::RAW, card.clone()),
        (reply::KEYPAD, vec![0, 2, b'1', b'2']),
        (reply::LSTATR, vec![1, 0]),
        (reply::XRD, vec![1, 1, 0, 1]),
    ];
    for kind in HANDSHAKE_BLOCKS {
        for (code, data) in &forged {
            let mut p = Pair::secure(true);
            let _ = p.cp_events();
            p.now += Duration::from_millis(100);
            let c = p.next_command();
            assert!(c.scb.is_some());
            let r = Frame::new(1, true, c.sqn, *code, data.clone());
            p.cp.receive(&with_scb(r, kind), p.now);
            let evs = p.cp_events();
            assert!(
                !evs.iter().any(|e| matches!(
                    e,
                    CpEvent::Card { .. }
                        | CpEvent::Keypad { .. }
                        | CpEvent::LocalStatus { .. }
                        | CpEvent::InputStatus { .. }
                        | CpEvent::CardPresence { .. }
                )),
                "block {kind:#x} reply {code:#x}: forged data accepted: {evs:?}"
            );
            assert!(
                evs.iter().any(|e| matches!(
                    e,
                    CpEvent::Refused {
                        reason: Refusal::Mac(_),
                        ..
                    }
                )),
                "block {kind:#x} reply {code:#x}: {evs:?}"
            );
            assert!(!p.cp.is_secure(1));
        }
    }
}

#[test]
fn cp_refuses_a_handshake_reply_that_answers_an_ordinary_command() {
    let mut p = Pair::secure(true);
    let _ = p.cp_events();
    p.now += Duration::from_millis(100);
    let c = p.next_command();
    assert_eq!(c.code, cmd::POLL);
    let mut data = id().cuid().to_vec();
    data.extend_from_slice(&[0; 24]);
    let r = Frame::new(1, true, c.sqn, reply::CCRYPT, data);
    p.cp.receive(&with_scb(r, scs::SCS_12), p.now);
    let evs = p.cp_events();
    assert!(
        evs.iter().any(|e| matches!(e, CpEvent::Refused { .. })),
        "{evs:?}"
    );
    assert!(!p.cp.is_online(1));
}

fn forged_card_answers_id(setup: PdSetup) -> Vec<CpEvent> {
    let mut cp = ControlPanel::new(CpConfig::default(), vec![setup]);
    let now = Instant::now();
    let c = Frame::decode(&cp.poll_transmit(now).expect("id")).unwrap();
    assert_eq!(c.code, cmd::ID);
    let r = Frame::new(
        1,
        true,
        c.sqn,
        reply::RAW,
        vec![0, 1, 26, 0, 0xde, 0xad, 0xbe, 0xc0],
    );
    cp.receive(&r.encode().unwrap(), now);
    std::iter::from_fn(|| cp.poll_event()).collect()
}

#[test]
fn cp_takes_no_device_data_while_connecting() {
    for setup in [PdSetup::secure(1, KEY), PdSetup::plain(1)] {
        let evs = forged_card_answers_id(setup);
        assert!(
            !evs.iter().any(|e| matches!(e, CpEvent::Card { .. })),
            "card accepted while connecting: {evs:?}"
        );
        assert!(
            evs.contains(&CpEvent::Offline {
                address: 1,
                reason: OfflineReason::UnexpectedReply {
                    command: cmd::ID,
                    reply: reply::RAW
                }
            }),
            "{evs:?}"
        );
    }
}

/// Answers the connect sequence up to `osdp_CAP`, then answers CAP with `reply`.
fn cp_after_cap_reply(code: u8, data: Vec<u8>) -> (ControlPanel, Instant) {
    let mut cp = ControlPanel::new(CpConfig::default(), vec![PdSetup::plain(1)]);
    let now = Instant::now();
    let c = Frame::decode(&cp.poll_transmit(now).unwrap()).unwrap();
    let r = Frame::new(
        1,
        true,
        c.sqn,
        reply::PDID,
        vec![1, 2, 3, 1, 1, 7, 0, 0, 0, 1, 0, 0],
    );
    cp.receive(&r.encode().unwrap(), now);
    let c = Frame::decode(&cp.poll_transmit(now).unwrap()).unwrap();
    assert_eq!(c.code, cmd::CAP);
    cp.receive(
        &Frame::new(1, true, c.sqn, code, data).encode().unwrap(),
        now,
    );
    (cp, now)
}

#[test]
fn cp_retries_after_an_unexpected_or_undecodable_reply_while_connecting() {
    // A NAK, a valid but unexpected reply, and a reply whose data does not decode.
    for (code, data) in [
        (reply::NAK, vec![3]),
        (reply::ACK, vec![]),
        (reply::PDCAP, vec![1, 2]),
    ] {
        let (mut cp, mut now) = cp_after_cap_reply(code, data);
        let evs: Vec<_> = std::iter::from_fn(|| cp.poll_event()).collect();
        assert!(
            evs.iter().any(|e| matches!(
                e,
                CpEvent::Offline {
                    reason: OfflineReason::UnexpectedReply {
                        command: cmd::CAP,
                        ..
                    },
                    ..
                }
            )),
            "reply {code:#x}: {evs:?}"
        );
        // Nothing to send until the retry: the deadline is not in the past.
        assert!(cp.poll_transmit(now).is_none());
        assert!(cp.next_deadline(now) > now, "reply {code:#x}: would spin");
        let mut sent = None;
        for _ in 0..10 {
            now += Duration::from_millis(500);
            if let Some(b) = cp.handle_timeout(now).or_else(|| cp.poll_transmit(now)) {
                sent = Some(Frame::decode(&b).unwrap());
                break;
            }
        }
        let sent = sent.expect("the connection is tried again");
        assert_eq!((sent.code, sent.sqn), (cmd::ID, 0));
    }
}

#[test]
fn keyed_pd_refuses_a_plaintext_command_that_resets_the_sequence() {
    for require_secure in [false, true] {
        let mut p = Pair::secure(require_secure);
        let f = Frame::new(1, false, 0, cmd::OUT, vec![0, 2, 0, 0]);
        let r = p.pd.receive(&f.encode().unwrap(), &mut p.app);
        assert!(
            p.app.outs.is_empty(),
            "plaintext OUT obeyed: {:?}",
            p.app.outs
        );
        assert_eq!(Frame::decode(&r).unwrap().code, reply::NAK);
    }
    // An install-mode device without a key refuses plaintext outputs too.
    let mut cfg = PdConfig::reader(1, id());
    cfg.install_mode = true;
    let mut pd = PeripheralDevice::new(cfg);
    let mut app = Rec::default();
    let f = Frame::new(1, false, 0, cmd::OUT, vec![0, 2, 0, 0]);
    let _ = pd.receive(&f.encode().unwrap(), &mut app);
    assert!(app.outs.is_empty());
}

#[test]
fn busy_with_sequence_zero_is_retried_later_for_its_owner() {
    let mut p = Pair::secure(true);
    let _ = p.cp_events();
    let ticket =
        p.cp.submit(
            1,
            Command::Output(vec![OutputControl {
                output: 0,
                control_code: 2,
                timer: 0,
            }]),
        )
        .unwrap();
    let c = p.next_command();
    assert_eq!(c.code, cmd::OUT);
    let busy = Frame::new(1, true, 0, reply::BUSY, vec![])
        .encode()
        .unwrap();
    p.cp.receive(&busy, p.now);
    assert!(p.cp.is_secure(1), "BUSY is not a failure");
    // Not again at once: later, with the same bytes.
    assert!(p.cp.poll_transmit(p.now).is_none());
    assert!(p.cp.next_deadline(p.now) > p.now);
    let again = p.next_command();
    assert_eq!((again.code, again.sqn), (c.code, c.sqn));
    assert_eq!(again.encode().unwrap(), c.encode().unwrap());
    let r = p.pd.receive(&again.encode().unwrap(), &mut p.app);
    p.cp.receive(&r, p.now);
    let evs = p.cp_events();
    assert!(
        evs.contains(&CpEvent::Completed {
            address: 1,
            command: cmd::OUT,
            ticket,
            reply: Reply::Ack
        }),
        "{evs:?}"
    );
    assert_eq!(p.app.outs.len(), 1);
}

#[test]
fn install_mode_tries_the_configured_key_first_and_recovers_a_lost_keyset_ack() {
    let setup = PdSetup {
        address: 1,
        scbk: Some(KEY),
        install_mode: true,
    };
    let mut cfg = PdConfig::reader(1, id());
    cfg.install_mode = true;
    let mut p = Pair::new(setup, cfg);
    // Lose every answer to osdp_KEYSET (the device still takes the key).
    let mut lost = 0;
    for _ in 0..5000 {
        p.step(&mut |c| {
            if c.code == cmd::KEYSET {
                lost += 1;
                return false;
            }
            true
        });
        if p.cp.is_secure(1) {
            break;
        }
    }
    assert!(lost > 0, "no KEYSET was sent");
    assert!(p.cp.is_secure(1), "installation did not recover");
    assert_eq!(p.pd.scbk(), Some(&KEY));
    assert!(!p.pd.install_mode());
    let evs = p.cp_events();
    assert!(
        evs.contains(&CpEvent::KeyInstalled { address: 1 }),
        "{evs:?}"
    );

    // Once the key is in, a reconnect uses it and never SCBK-D.
    let _ = p.cp_events();
    p.pd = {
        let mut cfg = PdConfig::reader(1, id());
        cfg.scbk = Some(KEY);
        PeripheralDevice::new(cfg)
    };
    let mut chlng_blocks = vec![];
    let mut cp = ControlPanel::new(
        CpConfig::default(),
        vec![PdSetup {
            address: 1,
            scbk: Some(KEY),
            install_mode: true,
        }],
    );
    std::mem::swap(&mut p.cp, &mut cp);
    for _ in 0..2000 {
        p.step(&mut |c| {
            if c.code == cmd::CHLNG {
                chlng_blocks.push(c.scb.as_ref().unwrap().data[0]);
            }
            true
        });
        if p.cp.is_secure(1) {
            break;
        }
    }
    assert!(p.cp.is_secure(1));
    assert_eq!(chlng_blocks, vec![1], "only the configured key is used");
}

#[test]
fn a_trickle_of_noise_does_not_hold_off_the_reply_timeout_for_ever() {
    let mut cp = ControlPanel::new(CpConfig::default(), vec![PdSetup::plain(1)]);
    let mut now = Instant::now();
    let c = Frame::decode(&cp.poll_transmit(now).unwrap()).unwrap();
    assert_eq!(c.code, cmd::ID);
    // Every 150 ms one byte of noise that keeps announcing a long packet.
    let mut timed_out = false;
    for i in 0..20_000usize {
        now += Duration::from_millis(150);
        if cp.handle_timeout(now).is_some() {
            timed_out = true;
            break;
        }
        let b = match i % 1023 {
            0 => 0x53,
            1 => 0x01,
            2 => 0xFF,
            3 => 0x03,
            _ => 0x00,
        };
        cp.receive(&[b], now);
    }
    assert!(timed_out, "the command was never retried");
}

#[test]
fn a_plaintext_ack_to_keyset_is_refused() {
    let mut p = Pair::secure(true);
    let _ = p.cp_events();
    let ticket = p.cp.submit(1, Command::KeySet { key: [0x33; 16] }).unwrap();
    let c = p.next_command();
    assert_eq!(c.code, cmd::KEYSET);
    let ack = Frame::new(1, true, c.sqn, reply::ACK, vec![]);
    p.cp.receive(&ack.encode().unwrap(), p.now);
    let evs = p.cp_events();
    assert!(
        !evs.iter()
            .any(|e| matches!(e, CpEvent::KeyInstalled { .. } | CpEvent::Completed { .. })),
        "{evs:?}"
    );
    assert!(
        evs.contains(&CpEvent::Abandoned {
            address: 1,
            command: cmd::KEYSET,
            ticket
        }),
        "{evs:?}"
    );
    assert!(!p.cp.is_online(1));
}
