//! The path search's dead-end memory: a certificate remembered as reaching no trust anchor is
//! skipped only on paths where the reason it was a dead end still holds, so a valid path that
//! goes through it by another route is still found.

use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationOptions};
use pki_issue::{now, CertificateBuilder, KeyAlgorithm, KeyPair};

/// A CA: its key and subject.
struct Ca {
    key: KeyPair,
    subject: String,
}

fn ca(name: &str) -> Ca {
    Ca {
        key: KeyPair::generate(KeyAlgorithm::P256).unwrap(),
        subject: format!("CN={name},O=Example,C=US"),
    }
}

/// `subject`'s CA certificate issued by `issuer` (`issuer_cert` being any certificate of it).
fn cross(subject: &Ca, issuer_cert: &[u8], issuer: &Ca) -> Vec<u8> {
    CertificateBuilder::new(&subject.subject, subject.key.spki_der())
        .unwrap()
        .ca(None)
        .sign(issuer_cert, &issuer.key)
        .unwrap()
}

fn opts() -> ValidationOptions {
    let mut o = ValidationOptions {
        time: Time(now()),
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    o
}

#[test]
fn a_dead_end_found_through_a_loop_does_not_hide_a_valid_path_around_it() {
    // L ← M; M is certified by E and by Q; E by the anchor T, by P and by R; P by D, D by E,
    // R by P, Q by R. The shortest path, L, M_by_E, E_by_T, breaks M_by_E's name
    // constraints. Searching above E, every route through P ends at E again, which is on the
    // path: a dead end only while E is on the path. The valid path
    // L, M_by_Q, Q_by_R, R_by_P, P_by_D, D_by_E, E_by_T does not hold E below them.
    let [t, e, p, d, r, q, m] = ["T", "E", "P", "D", "R", "Q", "M"].map(ca);
    let t_cert = CertificateBuilder::new(&t.subject, t.key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&t.key)
        .unwrap();
    let e_by_t = cross(&e, &t_cert, &t);
    let d_by_e = cross(&d, &e_by_t, &e);
    let p_by_d = cross(&p, &d_by_e, &d);
    let r_by_p = cross(&r, &p_by_d, &p);
    let q_by_r = cross(&q, &r_by_p, &r);
    let e_by_p = cross(&e, &p_by_d, &p);
    let e_by_r = cross(&e, &r_by_p, &r);
    let m_by_e = CertificateBuilder::new(&m.subject, m.key.spki_der())
        .unwrap()
        .ca(None)
        .name_constraints(&[], &["O=Example,C=US"])
        .unwrap()
        .sign(&e_by_t, &e.key)
        .unwrap();
    let m_by_q = cross(&m, &q_by_r, &q);
    let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let leaf = CertificateBuilder::new("CN=Leaf,O=Example,C=US", leaf_key.spki_der())
        .unwrap()
        .end_entity()
        .sign(&m_by_q, &m.key)
        .unwrap();
    let intermediates = [
        &m_by_e, &m_by_q, &e_by_t, &e_by_p, &e_by_r, &p_by_d, &d_by_e, &r_by_p, &q_by_r,
    ];
    let mut b = TrustStore::builder();
    b.add_anchor_der(t_cert.clone());
    for c in intermediates {
        b.add_intermediate_der(c.to_vec());
    }
    let store = b.build();
    let path = validate(&store, &leaf, &[], &RevocationSet::empty(), &opts()).unwrap();
    let chain: Vec<&[u8]> = path.chain().iter().map(|c| c.der()).collect();
    let want: Vec<&[u8]> = vec![
        &leaf, &m_by_q, &q_by_r, &r_by_p, &p_by_d, &d_by_e, &e_by_t, &t_cert,
    ];
    assert!(chain == want, "{:?}", subjects(&path));
}

/// Each certificate of the path as "subject by issuer".
fn subjects(path: &pki::validate::ValidatedPath) -> Vec<String> {
    path.chain()
        .iter()
        .map(|c| format!("{} by {}", c.subject_display(), c.issuer_display()))
        .collect()
}
