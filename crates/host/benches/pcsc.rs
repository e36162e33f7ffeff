//! Host overhead per APDU through pcscd + vpcd, against the same APDU sent
//! with a raw `SCardTransmit` (the `pcsc` crate, no framing logic) and with a
//! pyscard loop on the same reader; and the cost of an empty PC/SC
//! transaction (100 × SCardBeginTransaction + SCardEndTransaction, the
//! pcsc-lite measurement that once found a 1-10 ms sleep there).
//!
//! Run: `cargo bench -p host --bench pcsc` (root; pcscd and vsmartcard-vpcd
//! installed by scripts/setup.sh). Prints a table; nothing is asserted.

use card::{vpcd, Card, CardImage, Runner, TimingProfile};
use host::client::{exchange, Piv};
use host::{Channel, Readers};
use std::ffi::CString;
use std::process::Command;
use std::time::{Duration, Instant};

const SELECT: [u8; 17] = [
    0x00, 0xA4, 0x04, 0x00, 0x0B, 0xA0, 0x00, 0x00, 0x03, 0x08, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00,
    0x00,
];
const N: usize = 2000;
const ROUNDS: usize = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median µs per call of `f` over ROUNDS rounds of `n` calls.
fn per_call(n: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    median(
        (0..ROUNDS)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..n {
                    f();
                }
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            })
            .collect(),
    )
}

fn pyscard(reader: &str) -> Result<f64, String> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../bench/pcsc/pyscard_loop.py"
    );
    let hex: String = SELECT.iter().map(|b| format!("{b:02X}")).collect();
    let out = Command::new("/usr/bin/python3")
        .args([script, reader, &hex, &N.to_string(), &ROUNDS.to_string()])
        .output()
        .map_err(|e| format!("cannot run /usr/bin/python3: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| format!("unexpected pyscard output: {e}"))
}

fn main() {
    let _lock = testbed::lock_vpcd();
    let _pcscd = match testbed::Pcscd::ensure_started() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("pcsc bench skipped: {e}");
            return;
        }
    };
    testbed::wait_for_reader(testbed::VPCD_READER, Duration::from_secs(10)).expect("vpcd reader");
    let card = vpcd::Background::spawn(
        Runner::new(
            Card::new(CardImage::new_blank(Some(1))),
            None,
            TimingProfile::Instant,
        ),
        testbed::VPCD_ADDR,
    );
    testbed::wait_for_card(testbed::VPCD_READER, Duration::from_secs(10)).expect("card");

    // Raw SCardTransmit through the pcsc crate, and pivgate's transport on
    // a second connection to the same card; measured in interleaved rounds
    // so that drift in machine load hits both alike.
    let ctx = pcsc::Context::establish(pcsc::Scope::User).expect("context");
    let name = CString::new(testbed::VPCD_READER).unwrap();
    let raw_card = ctx
        .connect(&name, pcsc::ShareMode::Shared, pcsc::Protocols::ANY)
        .expect("connect");
    let mut buf = vec![0u8; pcsc::MAX_BUFFER_SIZE_EXTENDED];
    let readers = Readers::establish().expect("context");
    let mut t = readers.connect(testbed::VPCD_READER).expect("connect");
    let (mut raw, mut transport, mut client) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        raw.push(per_call(N / 4, || {
            let r = raw_card.transmit(&SELECT, &mut buf).expect("transmit");
            assert_eq!(&r[r.len() - 2..], &[0x90, 0x00]);
        }));
        transport.push(per_call(N / 4, || {
            let r = t.transmit(&SELECT).expect("transmit");
            assert_eq!(&r[r.len() - 2..], &[0x90, 0x00]);
        }));
        client.push(per_call(N / 4, || {
            Piv::new(&mut t).select().expect("select");
        }));
    }
    let (raw, transport, client) = (median(raw), median(transport), median(client));
    let empty_tx = per_call(100, || t.empty_transaction().expect("transaction"));
    drop(t);
    drop(raw_card);
    let py = pyscard(testbed::VPCD_READER);

    // The client's own work per APDU, with the I/O taken out: the same
    // SELECT through exchange + APT decoding over a channel that answers
    // from memory.
    let answer = {
        let mut c = Card::new(CardImage::new_blank(Some(1)));
        c.power_on();
        c.process(&SELECT)
    };
    let mut canned = Canned(answer);
    let logic = per_call(N * 50, || {
        Piv::new(&mut canned).select().expect("select");
    });
    let exchange_only = per_call(N * 50, || {
        let r =
            exchange(&mut canned, 0x00, 0xA4, 0x04, 0x00, &SELECT[5..16], true).expect("exchange");
        assert!(r.ok());
    });

    card.stop().expect("vpcd connector");

    println!("host overhead per APDU through pcscd + vpcd ({N} x SELECT PIV, median of {ROUNDS} interleaved rounds)");
    println!("  {:<52} {:>10}", "path", "us/APDU");
    println!("  {:<52} {:>10.2}", "raw SCardTransmit (pcsc crate)", raw);
    println!(
        "  {:<52} {:>10.2}",
        "pivgate PcscTransport::transmit", transport
    );
    println!(
        "  {:<52} {:>10.2}",
        "pivgate Piv::select (exchange + APT decode)", client
    );
    match &py {
        Ok(p) => println!("  {:<52} {:>10.2}", "pyscard loop (peer, same reader)", p),
        Err(e) => println!(
            "  {:<52} {:>10}",
            "pyscard loop (peer)",
            format!("unavailable: {e}")
        ),
    }
    println!("  the client's own work, I/O taken out (budget <= 5 us above SCardTransmit):");
    println!(
        "  {:<52} {:>10.3}",
        "exchange (status words, 61xx, chaining)", exchange_only
    );
    println!(
        "  {:<52} {:>10.3}",
        "Piv::select (exchange + APT decode)", logic
    );
    if let Ok(p) = py {
        println!(
            "  pyscard / pivgate Piv::select wall time: {:.2}x",
            p / client
        );
    }
    println!(
        "empty PC/SC transaction (SCardBeginTransaction + SCardEndTransaction): {:.1} us each, {:.2} ms per 100",
        empty_tx,
        empty_tx * 100.0 / 1000.0
    );
}

/// A channel that answers every command from memory.
struct Canned(Vec<u8>);

impl Channel for Canned {
    fn transmit(&mut self, _apdu: &[u8]) -> Result<Vec<u8>, host::TransportError> {
        Ok(self.0.clone())
    }
    fn extended_length(&self) -> bool {
        false
    }
    fn traffic(&self) -> host::Traffic {
        host::Traffic::default()
    }
}
