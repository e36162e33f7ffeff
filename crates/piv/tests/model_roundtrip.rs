//! Property tests: every encoder of the PIV data model round-trips through
//! its decoder, and decoders never panic on arbitrary bytes.

use piv::ccc::{Ccc, KeyHistory};
use piv::discovery::Discovery;
use piv::{ApplicationProperties, CertContainer, DataObject, DynAuth, PublicKeyTemplate};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

proptest! {
    #[test]
    fn dynamic_authentication_template_round_trips(
        w in proptest::option::of(bytes(40)),
        c in proptest::option::of(bytes(600)),
        r in proptest::option::of(bytes(40)),
        e in proptest::option::of(bytes(100)),
    ) {
        let t = DynAuth {
            witness: w.as_deref(),
            challenge: c.as_deref(),
            response: r.as_deref(),
            exponentiation: e.as_deref(),
        };
        let enc = t.encode();
        prop_assert_eq!(DynAuth::decode(&enc).unwrap(), t);
    }

    #[test]
    fn public_key_templates_round_trip(n in bytes(520), e in bytes(8), point in bytes(100)) {
        if !n.is_empty() && !e.is_empty() {
            let rsa = PublicKeyTemplate::Rsa { modulus: n, exponent: e };
            prop_assert_eq!(PublicKeyTemplate::decode(&rsa.encode()).unwrap(), rsa);
        }
        let mut p = vec![0x04];
        p.extend_from_slice(&point);
        let ec = PublicKeyTemplate::Ec { point: p.clone() };
        let decoded = PublicKeyTemplate::decode(&ec.encode());
        // Only odd-length uncompressed points are valid.
        prop_assert_eq!(decoded.is_ok(), p.len() % 2 == 1);
    }

    #[test]
    fn certificate_containers_round_trip(cert in bytes(3000), compressed in any::<bool>()) {
        prop_assume!(!cert.is_empty());
        let c = CertContainer { certificate: cert, compressed };
        prop_assert_eq!(CertContainer::decode(&c.encode()).unwrap(), c);
    }

    #[test]
    fn application_properties_round_trip(label in proptest::option::of("[ -~]{0,40}")) {
        let apt = ApplicationProperties::piv(label.as_deref(), &[piv::Algorithm::EccP256, piv::Algorithm::Rsa2048]);
        prop_assert_eq!(ApplicationProperties::decode(&apt.encode()).unwrap(), apt);
    }

    #[test]
    fn small_objects_round_trip(id in any::<[u8; 14]>(), on in 0u8..=10, off in 0u8..=10, policy in any::<[u8; 2]>()) {
        let ccc = Ccc::new(id);
        prop_assert_eq!(Ccc::decode(&ccc.encode()).unwrap(), ccc);
        let kh = KeyHistory { on_card: on, off_card: off, url: None };
        prop_assert_eq!(KeyHistory::decode(&kh.encode()).unwrap(), kh);
        let d = Discovery { pin_policy: policy, ..Discovery::default() };
        prop_assert_eq!(Discovery::decode(&d.encode()).unwrap(), d);
    }

    #[test]
    fn decoders_never_panic(data in bytes(600)) {
        let _ = DynAuth::decode(&data);
        let _ = PublicKeyTemplate::decode(&data);
        let _ = CertContainer::decode(&data);
        let _ = ApplicationProperties::decode(&data);
        let _ = Ccc::decode(&data);
        let _ = KeyHistory::decode(&data);
        let _ = Discovery::decode(&data);
        let _ = DataObject::from_tag_bytes(&data);
    }
}
