//! Fuzzes the authentication mechanisms with hostile card answers, with the
//! fast path warm (the PIV client alone is `host_client`).
//!
//! A genuine P-256 card (issued by a test PKI) sits behind a transport that
//! lets the input rewrite each answer before the host sees it. Input format:
//! the first byte picks the mechanism (PKI-CAK, PKI-AUTH, CHUID, or the
//! `read` inspection), then one record per APDU, `[op][len][len bytes]`:
//! op 0 passes the genuine answer through, 1 replaces it with the bytes,
//! 2 XORs the bytes into it from offset `bytes[0]`, 3 truncates it to
//! `bytes[0]` bytes. When the input runs out the genuine card answers.
//!
//! Besides "never panic, never hang": a grant must name the genuine card.
//! The challenge is fresh and random, so no rewritten answer can carry a
//! valid signature; a grant for another identity would mean a check was
//! skipped.

#![no_main]

use auth::{Authenticator, FixedPin, Mechanism, Settings};
use card::image::CardImage;
use card::Card;
use host::{Channel, Traffic, Transport, TransportError, TransportExt};
use libfuzzer_sys::fuzz_target;
use pki_issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::sync::OnceLock;

struct Fixture {
    image: CardImage,
    creds: CardCredentials,
    authn: Authenticator,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
        let creds = pki
            .issue_card(&CardOptions {
                algorithm: KeyAlgorithm::P256,
                ..CardOptions::default()
            })
            .expect("P-256 card");
        let image = creds.card_image(Some(7)).expect("personalise");
        let authn = Authenticator::new(
            pki.trust_store(),
            pki.crl_set().expect("CRLs"),
            Settings::default(),
        );
        // Warm the fast path: the genuine card's key is now cached.
        let mut genuine = host::InProcess::new(Card::new(image.clone()));
        let t = authn.authenticate(&mut genuine, Mechanism::PkiCak, None, None);
        assert!(t.outcome.granted(), "genuine card refused: {:?}", t.outcome);
        Fixture {
            image,
            creds,
            authn,
        }
    })
}

/// The genuine card, with the input rewriting its answers.
struct Hostile<'a> {
    card: host::InProcess,
    script: &'a [u8],
    traffic: Traffic,
}

impl Channel for Hostile<'_> {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        let mut answer = self.card.transmit(apdu)?;
        if let [op, len, rest @ ..] = self.script {
            let n = usize::from(*len).min(rest.len());
            let (bytes, next) = rest.split_at(n);
            self.script = next;
            match op % 4 {
                1 => answer = bytes.to_vec(),
                2 => {
                    if let Some((&at, xs)) = bytes.split_first() {
                        for (a, x) in answer.iter_mut().skip(usize::from(at)).zip(xs) {
                            *a ^= x;
                        }
                    }
                }
                3 => answer.truncate(usize::from(bytes.first().copied().unwrap_or(0))),
                _ => {}
            }
        }
        self.traffic.apdus += 1;
        self.traffic.bytes_out += apdu.len() as u64;
        self.traffic.bytes_in += answer.len() as u64;
        Ok(answer)
    }

    fn extended_length(&self) -> bool {
        self.card.extended_length()
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

impl Transport for Hostile<'_> {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }

    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        self.card.reconnect(reset)
    }

    fn atr(&self) -> &[u8] {
        self.card.atr()
    }

    fn reader(&self) -> &str {
        "hostile"
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&which, script)) = data.split_first() else {
        return;
    };
    let mut t = Hostile {
        card: host::InProcess::new(Card::new(f.image.clone())),
        script,
        traffic: Traffic::default(),
    };
    let mechanism = match which % 4 {
        0 => Mechanism::PkiCak,
        1 => Mechanism::PkiAuth,
        2 => Mechanism::Chuid,
        _ => {
            let _ = t.with_transaction(|ch| Ok(auth::inspect::read_card(ch)));
            return;
        }
    };
    let mut pin = FixedPin::new("123456");
    let pin: Option<&mut dyn auth::PinSource> = match mechanism {
        Mechanism::PkiAuth => Some(&mut pin),
        _ => None,
    };
    let tx = f.authn.authenticate(&mut t, mechanism, pin, None);
    if tx.outcome.granted() {
        assert_eq!(
            tx.card.uuid,
            Some(piv::chuid::CardUuid(f.creds.uuid)),
            "granted a card that is not the genuine one: {tx:?}"
        );
    } else {
        assert!(!tx.outcome.refusal().unwrap().to_string().is_empty());
    }
});
