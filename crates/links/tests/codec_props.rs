//! Property tests: the OSDP decoders never panic on arbitrary or mutated
//! input, and what the encoder builds decodes to the same packet.

use links::osdp::codec::{Frame, FrameDecoder, Scb};
use links::osdp::msg::{Command, Reply};
use proptest::prelude::*;

fn frame() -> impl Strategy<Value = Frame> {
    (
        0u8..0x80,
        any::<bool>(),
        0u8..4,
        any::<bool>(),
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::option::of((
            0x11u8..=0x18,
            proptest::collection::vec(any::<u8>(), 0..2),
            any::<[u8; 4]>(),
        )),
    )
        .prop_map(|(address, reply, sqn, crc, code, data, scb)| {
            let mut f = Frame::new(address, reply, sqn, code, data);
            f.crc = crc;
            if let Some((kind, d, mac)) = scb {
                f.scb = Some(Scb { kind, data: d });
                f.mac = (kind >= 0x15).then_some(mac);
            }
            f
        })
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(f in frame()) {
        let bytes = f.encode().unwrap();
        prop_assert_eq!(bytes.len(), f.wire_len());
        prop_assert_eq!(Frame::decode(&bytes).unwrap(), f);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = Frame::decode(&bytes);
        let mut d = FrameDecoder::new();
        d.push(&bytes);
        while d.next().is_some() {}
        for code in [0x60u8, 0x61, 0x68, 0x69, 0x6A, 0x6E, 0x75, 0x76, 0x77, 0xA1, 0x40, 0x41, 0x45, 0x46, 0x50, 0x51, 0x53, 0xB1] {
            let _ = Command::decode(code, &bytes);
            let _ = Reply::decode(code, &bytes);
        }
    }

    #[test]
    fn mutated_frames_are_rejected_or_resynchronised(
        f in frame(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        garbage in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let good = f.encode().unwrap();
        let mut bad = good.clone();
        for (i, x) in &flips {
            let i = i.index(bad.len());
            bad[i] ^= x;
        }
        // Mutated bytes either fail to decode or (rarely, for checksum frames)
        // decode to some packet; they never panic.
        let _ = Frame::decode(&bad);
        // After garbage and the damaged copy, the intact packet is still found.
        let mut d = FrameDecoder::new();
        d.push(&garbage);
        d.push(&bad);
        d.push(&good);
        let mut found = false;
        while let Some(r) = d.next() {
            if r.as_ref() == Ok(&f) {
                found = true;
            }
        }
        // A stray start byte announcing a longer packet than what follows
        // does not hide the intact packet after it. (A damaged checksum
        // packet can pass its one-byte check and swallow the start of the
        // intact one, so only CRC packets must always resynchronise.)
        if !f.crc {
            found = true;
        }
        prop_assert!(found);
    }
}

proptest! {
    /// The same receive paths as the `osdp_decode` fuzz target: bus bytes in
    /// uneven slices to a plain PD, a keyed PD in install mode and a panel
    /// waiting for replies. Nothing panics.
    #[test]
    fn state_machines_survive_arbitrary_bus_bytes(
        pieces in proptest::collection::vec(
            prop_oneof![
                frame().prop_map(|f| f.encode().unwrap()),
                // Addressed to the devices, with codes they know.
                (frame(), 1u8..3, proptest::sample::select(vec![
                    0x60u8, 0x61, 0x62, 0x64, 0x68, 0x69, 0x6A, 0x6E, 0x75, 0x76, 0x77, 0xA1,
                    0x40, 0x41, 0x45, 0x46, 0x50, 0x53, 0x76, 0x78, 0x79, 0xB1,
                ]))
                    .prop_map(|(mut f, a, c)| {
                        f.address = a;
                        f.code = c;
                        f.encode().unwrap()
                    }),
                proptest::collection::vec(any::<u8>(), 0..40),
            ],
            0..30,
        ),
        step in 1usize..64,
    ) {
        // Well-formed packets (any code, address, sequence number, security
        // block) mixed with garbage.
        let data: Vec<u8> = pieces.concat();
        use links::osdp::cp::{ControlPanel, CpConfig, PdSetup};
        use links::osdp::msg::PdId;
        use links::osdp::pd::{NoApp, PdConfig, PeripheralDevice};
        use links::osdp::sc::Key;
        use std::time::{Duration, Instant};

        let mut plain = PeripheralDevice::new(PdConfig::reader(1, PdId::default()));
        let mut cfg = PdConfig::reader(1, PdId::default());
        cfg.scbk = Some(Key([7; 16]));
        cfg.install_mode = true;
        let mut keyed = PeripheralDevice::new(cfg);
        let mut cp = ControlPanel::new(
            CpConfig::default(),
            vec![PdSetup::plain(1), PdSetup::secure(2, Key([7; 16]))],
        );
        let mut now = Instant::now();
        let _ = cp.poll_transmit(now);
        for chunk in data.chunks(step) {
            let _ = plain.receive(chunk, &mut NoApp);
            let _ = keyed.receive(chunk, &mut NoApp);
            cp.receive(chunk, now);
            now += Duration::from_millis(7);
            let _ = cp.handle_timeout(now);
            let _ = cp.poll_transmit(now);
            while cp.poll_event().is_some() {}
        }
    }

    /// The same bus bytes inside live secure sessions: a panel and a device
    /// that completed the handshake hear them between their own packets.
    /// Nothing without a valid MAC reaches either side's application.
    #[test]
    fn secure_sessions_survive_arbitrary_bus_bytes(
        pieces in proptest::collection::vec(
            prop_oneof![
                (frame(), 0u8..4, proptest::sample::select(vec![
                    0x60u8, 0x68, 0x75, 0x76, 0x77, 0xA1, 0x50, 0x53, 0x48, 0x76, 0x78, 0x79, 0xB1,
                ]), 0x11u8..=0x18, any::<bool>())
                    .prop_map(|(mut f, sqn, c, kind, reply)| {
                        f.address = 1;
                        f.code = c;
                        f.sqn = sqn;
                        f.reply = reply;
                        f.scb = Some(Scb { kind, data: vec![1] });
                        f.mac = (kind >= 0x15).then_some([0; 4]);
                        f.encode().unwrap()
                    }),
                proptest::collection::vec(any::<u8>(), 0..40),
            ],
            1..20,
        ),
    ) {
        use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, PdSetup};
        use links::osdp::msg::{OutputControl, PdId};
        use links::osdp::pd::{PdApp, PdConfig, PeripheralDevice};
        use links::osdp::sc::Key;
        use std::time::{Duration, Instant};

        #[derive(Default)]
        struct App { calls: u32 }
        impl PdApp for App {
            fn output(&mut self, _: &OutputControl) { self.calls += 1; }
            fn keyset(&mut self, _: &Key) -> bool { self.calls += 1; true }
        }

        let key = Key([7; 16]);
        let mut cfg = PdConfig::reader(1, PdId::default());
        cfg.scbk = Some(key.clone());
        let mut pd = PeripheralDevice::new(cfg);
        let mut cp = ControlPanel::new(CpConfig::default(), vec![PdSetup::secure(1, key)]);
        let mut app = App::default();
        let mut now = Instant::now();
        for _ in 0..100 {
            if let Some(b) = cp.poll_transmit(now) {
                let r = pd.receive(&b, &mut app);
                cp.receive(&r, now);
            }
            now += Duration::from_millis(1);
            if cp.is_secure(1) {
                break;
            }
        }
        prop_assert!(cp.is_secure(1) && pd.is_secure());
        while cp.poll_event().is_some() {}
        for piece in &pieces {
            // The forged bytes reach the device, and the panel while its
            // poll is in flight.
            let _ = pd.receive(piece, &mut app);
            now += Duration::from_millis(60);
            let _ = cp.handle_timeout(now);
            let _ = cp.poll_transmit(now);
            cp.receive(piece, now);
            while let Some(e) = cp.poll_event() {
                prop_assert!(
                    !matches!(
                        e,
                        CpEvent::Card { .. }
                            | CpEvent::CardText { .. }
                            | CpEvent::Keypad { .. }
                            | CpEvent::LocalStatus { .. }
                        | CpEvent::InputStatus { .. }
                            | CpEvent::CardPresence { .. }
                            | CpEvent::Completed { .. }
                    ),
                    "forged reply accepted: {:?}",
                    e
                );
            }
        }
        prop_assert_eq!(app.calls, 0);
    }
}
