//! Fuzzes the OSDP receive paths: the bytes are fed in uneven slices to the
//! stream decoder, to a peripheral device (plain and with a key) and to a
//! control panel waiting for a reply. Nothing may panic or hang; every
//! rejected packet is a typed error.

#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use links::osdp::codec::FrameDecoder;
use links::osdp::cp::{ControlPanel, CpConfig, PdSetup};
use links::osdp::msg::PdId;
use links::osdp::pd::{NoApp, PdConfig, PeripheralDevice};
use links::osdp::sc::Key;

fuzz_target!(|data: &[u8]| {
    let mut dec = FrameDecoder::new();
    let mut plain = PeripheralDevice::new(PdConfig::reader(1, PdId::default()));
    let mut keyed_cfg = PdConfig::reader(1, PdId::default());
    keyed_cfg.scbk = Some(Key([7; 16]));
    keyed_cfg.install_mode = true;
    let mut keyed = PeripheralDevice::new(keyed_cfg);
    let mut cp = ControlPanel::new(
        CpConfig::default(),
        vec![PdSetup::plain(1), PdSetup::secure(2, Key([7; 16]))],
    );
    let mut now = Instant::now();
    let _ = cp.poll_transmit(now);
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    for chunk in data.chunks(step) {
        dec.push(chunk);
        while dec.next().is_some() {}
        let _ = plain.receive(chunk, &mut NoApp);
        let _ = keyed.receive(chunk, &mut NoApp);
        cp.receive(chunk, now);
        now += Duration::from_millis(7);
        let _ = cp.handle_timeout(now);
        let _ = cp.poll_transmit(now);
        while cp.poll_event().is_some() {}
    }
});
