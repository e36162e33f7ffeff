//! Door-side wires: OSDP between the controller and its readers, and Wiegand
//! to legacy panels.
//!
//! # Design
//!
//! * [`osdp::codec`] frames and unframes OSDP v2.2 packets (SOM, address,
//!   length, control, security block, code, data, MAC, CRC-16/AUG-CCITT or
//!   checksum) with bounded parsing and a streaming decoder that resynchronises
//!   on `SOM` after garbage; [`osdp::msg`] gives each command and reply a type.
//! * [`osdp::sc`] is the AES-128 secure channel of the standard's Annex D
//!   (SCBK / SCBK-D, S-ENC, S-MAC1, S-MAC2, cryptograms, R-MAC_I, MAC chaining
//!   and data encryption), on aws-lc-rs's raw AES block function.
//! * [`osdp::cp`] (control panel, multidrop) and [`osdp::pd`] (peripheral
//!   device) are sans-I/O state machines: bytes and an explicit
//!   [`std::time::Instant`] in, bytes and events out, so reply timeouts,
//!   retries, offline detection and reconnection are tested without sleeping.
//! * [`serial`] connects a state machine to a tty in raw mode (a real port, or a
//!   pseudo-terminal pair in tests), paces writes at the configured baud rate
//!   (10 bits per byte) so link time is real, and blocks in `poll(2)` for input.
//! * [`transparent`] is a [`host::Transport`] over an OSDP reader in
//!   transparent mode (`osdp_XWR`/`osdp_XRD`): the controller runs PKI-CAK
//!   itself through the reader, with the same mechanism and fast path as over
//!   PC/SC, and the line counters give the link's share of a tap. Its reader
//!   side, [`transparent::CardBridge`], relays a panel's APDUs to any local
//!   [`host::Transport`], so a host with a PC/SC reader can serve as an OSDP
//!   reader (`pivgate reader osdp`); the reader reports a card's arrival and
//!   removal with `osdp_PR01PRES` on the next poll
//!   ([`serial::PdRemote::card_presence`], [`osdp::cp::CpEvent::CardPresence`]).
//!   [`host::Transport::line_time`] gives each tap's `Transaction` the line
//!   time it spent on the link (`link_us`).
//! * [`loopback`] puts a reader and its panel in one process over a paced
//!   pseudo-terminal pair (demo, benchmarks, tests); [`panel`] brings a
//!   reader on a serial device online as its control panel and waits for a
//!   card (`pivgate auth --osdp`, `pivgate reader connect --osdp`);
//!   [`reader`] is the other side, this host's card offered to a panel.
//! * [`wiegand`] encodes and decodes 26-bit H10301, 48-bit Corporate 1000,
//!   75-bit PIV, the 128-bit card UUID and the 200-bit FASC-N frame,
//!   computes a frame's time on the wire, records frames sent to a line and
//!   reassembles frames from timed pulses.
//!
//! # Why OSDP is written here
//!
//! crates.io has two OSDP crates. `libosdp` is a safe wrapper over the C
//! library libosdp (built from C source with `cc`/`bindgen`): it drives its own
//! timing loop through callbacks, cannot be stepped with an explicit clock,
//! does not pace a pseudo-terminal, and would add a second C crypto stack beside
//! aws-lc. `osdp` (0.1.x) is an early packet-level crate without the secure
//! channel or CP/PD state machines. The protocol is small and fully specified,
//! so it is written here as sans-I/O code, and libosdp itself — the reference
//! open implementation, from PyPI — is the peer the interop tests run against.
//!
//! It decides nothing: the controller (the door service) authenticates and decides; these are wires.

//! # Tested against
//!
//! * libosdp 3.2 (PyPI) as reader and as panel over a paced pseudo-terminal:
//!   ID, CAP, card reads, keypad, LED, buzzer, output, the secure channel with
//!   an installed key, and install mode (SCBK-D, then `osdp_KEYSET`, after
//!   which SCBK-D is refused) in both directions (`tests/libosdp_interop.rs`).
//! * The standard's Annex E vectors (CRC, checksum, SCBK-D session keys,
//!   cryptograms, R-MAC_I) and libosdp's MAC and data-encryption vectors.
//! * pivgate panel ↔ pivgate reader, transparent APDUs and PKI-CAK (full read
//!   and fast path) at 9600 and 115200 baud.
//!
//! # Limits
//!
//! * Transparent mode (`osdp_XWR`/`osdp_XRD`, extended mode 1) is tested
//!   pivgate ↔ pivgate only: libosdp's wheels are built without it.
//! * Multi-part messages, file transfer, `osdp_TEXT`, biometrics and
//!   manufacturer commands are not implemented (a PD answers them with NAK 3).
//! * The reader answers a request from its owner synchronously; it does not
//!   send `osdp_BUSY` while a slow card works (the panel accepts `osdp_BUSY`
//!   from other readers and asks again).
//! * `osdp_COMSET` is carried and answered, but the serial adapter does not
//!   switch its own speed or address afterwards.

pub mod loopback;
pub mod osdp;
pub mod panel;
pub mod reader;
pub mod serial;
pub mod transparent;
pub mod wiegand;
