//! Path building through a bridged mesh (`pki_issue::mesh`): over 300 CA certificates, a
//! bridge cross-certified both ways with agency roots and with a second bridge, a re-keyed
//! bridge whose old cross-certificates are still in the pool, expired and superseded
//! cross-certificates, and unrelated roots named like real ones. Every end entity with a path
//! validates with its shortest path, every other one is refused for its true reason, and no
//! validation comes near the work budget. OpenSSL checks a subset independently.

use pki::path::{validate_counting, Work};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, ValidatedPath, ValidationError, ValidationOptions};
use pki_issue::mesh::{Expect, Mesh, MeshAnchor, MeshLeaf, MeshOptions};
use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

fn mesh() -> &'static Mesh {
    static MESH: OnceLock<Mesh> = OnceLock::new();
    MESH.get_or_init(|| Mesh::generate(&MeshOptions::default()).expect("the mesh generates"))
}

fn crls(mesh: &Mesh) -> RevocationSet {
    let mut b = RevocationSet::builder();
    for c in mesh.crls() {
        b.add_der(c.der.clone()).expect("the mesh CRLs parse");
    }
    b.build()
}

/// The store for `anchor`: the anchor, and the rest of the pool as intermediates in `order`.
fn store(mesh: &Mesh, anchor: MeshAnchor, order: &[usize]) -> TrustStore {
    let pool = mesh.pool_without(anchor);
    let mut b = TrustStore::builder();
    b.add_anchor_der(mesh.anchor(anchor).to_vec());
    for &i in order {
        b.add_intermediate_der(pool[i].to_vec());
    }
    b.build()
}

fn opts(mesh: &Mesh, leaf: &MeshLeaf) -> ValidationOptions {
    let mut o = ValidationOptions {
        time: Time(mesh.time()),
        ..ValidationOptions::default()
    };
    o.initial_policy_set = vec![leaf.policy];
    o.initial_explicit_policy = true;
    o
}

/// A permutation of `0..n` from a small linear congruential generator.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in (1..n).rev() {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let j = (x >> 33) as usize % (i + 1);
        v.swap(i, j);
    }
    v
}

/// What a validation gave, in the terms of [`Expect`].
fn outcome(r: &Result<ValidatedPath, ValidationError>) -> Expect {
    match r {
        Ok(p) => Expect::Valid {
            depth: p.chain().len() - 1,
        },
        Err(e) => Expect::Invalid { code: e.code() },
    }
}

fn check_all(mesh: &Mesh, order_seed: Option<u64>, offered: bool) -> Vec<(String, Work)> {
    let crls = crls(mesh);
    let mut failures = Vec::new();
    let mut work = Vec::new();
    for leaf in mesh.leaves() {
        let n = mesh.pool_without(leaf.anchor).len();
        let order = match order_seed {
            Some(seed) => shuffled(n, seed),
            None => (0..n).collect(),
        };
        let o = opts(mesh, leaf);
        let (result, w) = if offered {
            // The pool offered with the validation instead of held by the store.
            let pool = mesh.pool_without(leaf.anchor);
            let offered: Vec<&[u8]> = order.iter().map(|&i| pool[i]).collect();
            let s = store(mesh, leaf.anchor, &[]);
            validate_counting(&s, &leaf.der, &offered, &crls, &o)
        } else {
            let s = store(mesh, leaf.anchor, &order);
            validate_counting(&s, &leaf.der, &[], &crls, &o)
        };
        let got = outcome(&result);
        if got != leaf.expect {
            let detail = match &result {
                Ok(p) => format!("a path of {}", p.chain().len() - 1),
                Err(e) => e.to_string(),
            };
            failures.push(format!(
                "{} (from {:?}, {}): expected {:?}, got {got:?}: {detail}",
                leaf.label, leaf.anchor, leaf.why, leaf.expect
            ));
        }
        if let Ok(p) = &result {
            assert_eq!(
                p.anchor().der(),
                mesh.anchor(leaf.anchor),
                "{}: the path ends at the chosen anchor",
                leaf.label
            );
        }
        assert!(
            !w.budget_exhausted,
            "{}: the validation reached the work budget ({} candidates)",
            leaf.label, w.candidates
        );
        work.push((leaf.label.clone(), w));
    }
    assert!(
        failures.is_empty(),
        "{} of {} end entities:\n{}",
        failures.len(),
        mesh.leaves().len(),
        failures.join("\n")
    );
    work
}

#[test]
fn every_end_entity_gets_its_expected_outcome_well_within_the_budget() {
    let mesh = mesh();
    assert!(mesh.cas().len() >= 300, "{} CAs", mesh.cas().len());
    let work = check_all(mesh, None, false);
    // Far from the budget: an honest mesh takes a small fraction of it.
    let most = work.iter().map(|(_, w)| w.candidates).max().unwrap_or(0);
    assert!(
        most * 20 < pki::path::MAX_WORK,
        "the most work for one end entity was {most} candidates: {work:?}"
    );
}

#[test]
fn the_outcome_does_not_depend_on_the_order_of_the_pool() {
    let mesh = mesh();
    for seed in [1, 2, 3] {
        check_all(mesh, Some(seed), false);
    }
    check_all(mesh, Some(4), true);
}

#[test]
fn the_same_result_through_validate() {
    let mesh = mesh();
    let crls = crls(mesh);
    for leaf in mesh.leaves().iter().step_by(5) {
        let n = mesh.pool_without(leaf.anchor).len();
        let s = store(mesh, leaf.anchor, &(0..n).collect::<Vec<_>>());
        let o = opts(mesh, leaf);
        let a = validate(&s, &leaf.der, &[], &crls, &o);
        let (b, _) = validate_counting(&s, &leaf.der, &[], &crls, &o);
        assert_eq!(outcome(&a), outcome(&b), "{}", leaf.label);
    }
}

/// Without any CRL, an end entity with a valid path is refused for the missing revocation
/// data, not for the work budget ("gave up after trying … candidate issuers").
#[test]
fn a_missing_crl_is_reported_as_such_not_as_the_budget() {
    let mesh = mesh();
    let leaf = mesh
        .leaves()
        .iter()
        .find(|l| l.label == "agency-0-employee")
        .expect("the mesh has agency 0's employee");
    let n = mesh.pool_without(leaf.anchor).len();
    let s = store(mesh, leaf.anchor, &(0..n).collect::<Vec<_>>());
    let (r, w) = validate_counting(
        &s,
        &leaf.der,
        &[],
        &RevocationSet::empty(),
        &opts(mesh, leaf),
    );
    let err = r.expect_err("no CRL at all");
    assert_eq!(err.code(), "revocation-unavailable", "{err}");
    assert!(!w.budget_exhausted, "{w:?}");
}

/// The path found is the shortest: the bridge's old key and the expired cross-certificates
/// lead to longer or failing paths, and the unrelated same-name roots to none.
#[test]
fn the_path_through_the_bridge_is_the_current_one() {
    let mesh = mesh();
    let crls = crls(mesh);
    let leaf = mesh
        .leaves()
        .iter()
        .find(|l| l.label == "agency-3-employee")
        .expect("the mesh has agency 3's employee");
    let n = mesh.pool_without(leaf.anchor).len();
    let s = store(mesh, leaf.anchor, &(0..n).collect::<Vec<_>>());
    let p = validate(&s, &leaf.der, &[], &crls, &opts(mesh, leaf)).expect("valid");
    let label_of = |der: &[u8]| {
        mesh.cas()
            .iter()
            .find(|c| c.der == der)
            .map(|c| c.label.as_str())
            .unwrap_or("?")
    };
    let labels: Vec<&str> = p.chain()[1..].iter().map(|c| label_of(c.der())).collect();
    assert_eq!(
        labels,
        [
            "agency-3-issuing-3",
            "agency-3-by-bridge",
            "bridge-by-common",
            "common-policy"
        ]
    );
}

/// Many CAs with one name and no key identifiers, every one cross-certifying every other,
/// under a trust anchor of the same name that signed none of them: every certificate is a
/// candidate issuer of every other and of the end entity (over 300,000 edges, too many to
/// map). Path building must end with the budget error, naming the end entity.
#[test]
fn a_crafted_same_name_mesh_ends_with_the_budget_error() {
    const NAME: &str = "CN=Crafted CA,O=Example,C=US";
    let keys: Vec<KeyPair> = (0..24)
        .map(|_| KeyPair::generate(KeyAlgorithm::P256).unwrap())
        .collect();
    let self_signed: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| {
            CertificateBuilder::new(NAME, k.spki_der())
                .unwrap()
                .ca(None)
                .subject_key_id(false)
                .self_signed(k)
                .unwrap()
        })
        .collect();
    let mut pool = Vec::new();
    for (i, issuer) in keys.iter().enumerate() {
        for (j, subject) in keys.iter().enumerate() {
            if i != j {
                pool.push(
                    CertificateBuilder::new(NAME, subject.spki_der())
                        .unwrap()
                        .ca(None)
                        .subject_key_id(false)
                        .sign(&self_signed[i], issuer)
                        .unwrap(),
                );
            }
        }
    }
    let anchor_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let anchor = CertificateBuilder::new(NAME, anchor_key.spki_der())
        .unwrap()
        .ca(None)
        .subject_key_id(false)
        .self_signed(&anchor_key)
        .unwrap();
    let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let leaf = CertificateBuilder::new("CN=Crafted Leaf,O=Example,C=US", leaf_key.spki_der())
        .unwrap()
        .end_entity()
        .sign(&self_signed[0], &keys[0])
        .unwrap();
    let mut b = TrustStore::builder();
    b.add_anchor_der(anchor);
    for c in &pool {
        b.add_intermediate_der(c.clone());
    }
    let s = b.build();
    let mut o = ValidationOptions::default();
    o.revocation.mode = pki::validate::RevocationMode::Off;
    let (r, w) = validate_counting(&s, &leaf, &[], &RevocationSet::empty(), &o);
    let err = r.expect_err("no certificate is signed by the anchor");
    assert_eq!(err.code(), "work-limit-exceeded", "{err}");
    assert!(err.to_string().contains("Crafted Leaf"), "{err}");
    assert!(w.budget_exhausted, "{w:?}");
}

// ------------------------------------------------------------------ OpenSSL as a peer

fn openssl_verify(dir: &Path, leaf: &MeshLeaf, time: i64) -> (bool, String) {
    let anchor = dir
        .join("anchors")
        .join(format!("{}.pem", leaf.anchor.label()));
    let out = Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(&anchor)
        .arg("-untrusted")
        .arg(
            dir.join("untrusted")
                .join(format!("{}.pem", leaf.anchor.label())),
        )
        .args(["-crl_check_all", "-CRLfile"])
        .arg(dir.join("crls.pem"))
        .args(["-explicit_policy", "-policy", &leaf.policy.to_string()])
        .args(["-attime", &time.to_string()])
        .arg(dir.join("leaves").join(format!("{}.pem", leaf.label)))
        .output()
        .expect("openssl is installed (scripts/setup.sh)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// OpenSSL agrees on the end entities whose paths do not cross a bridge (its chain builder
/// takes the first matching issuer and does not search a mesh): the SSP subscribers, the
/// agencies trusting their own roots, and an end entity whose issuer is nowhere.
#[test]
fn openssl_agrees_where_its_chain_building_applies() {
    let mesh = mesh();
    let dir = tempfile::tempdir().unwrap();
    mesh.write(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("untrusted")).unwrap();
    for anchor in [MeshAnchor::CommonPolicy, MeshAnchor::Agency(0)] {
        let pem: String = mesh
            .pool_without(anchor)
            .iter()
            .map(|d| pki_issue::pem_encode("CERTIFICATE", d))
            .collect();
        std::fs::write(
            dir.path()
                .join("untrusted")
                .join(format!("{}.pem", anchor.label())),
            pem,
        )
        .unwrap();
    }
    let subset: Vec<&MeshLeaf> = mesh
        .leaves()
        .iter()
        .filter(|l| {
            (l.label.starts_with("ssp-")
                || l.label == "orphan"
                || l.label == "agency-0-contractor-own-root")
                && matches!(l.anchor, MeshAnchor::CommonPolicy | MeshAnchor::Agency(0))
        })
        .collect();
    assert!(subset.len() >= 5, "{} end entities", subset.len());
    for leaf in subset {
        let (ok, text) = openssl_verify(dir.path(), leaf, mesh.time());
        let expected = matches!(leaf.expect, Expect::Valid { .. });
        assert_eq!(ok, expected, "{}: openssl said {text}", leaf.label);
    }
}

/// Five bridges, every pair cross-certified both ways with three current certificates each,
/// the last one certified by the trust anchor, and an end entity whose policy is mapped
/// nowhere while an explicit policy is required: every path fails its policy check, so every
/// one is tried. That stays well within the work budget.
#[test]
fn five_fully_cross_certified_bridges_and_an_unmapped_policy_stay_within_the_budget() {
    let p1: const_oid::ObjectIdentifier = "2.16.840.1.101.3.2.1.3.13".parse().unwrap();
    let p2: const_oid::ObjectIdentifier = "2.16.840.1.101.3.2.1.3.7".parse().unwrap();
    let t = pki_issue::now();
    let ca = |name: &str, k: &KeyPair| {
        CertificateBuilder::new(name, k.spki_der())
            .unwrap()
            .ca(None)
            .any_policy()
    };
    let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let root = ca("CN=Root,O=Example,C=US", &root_key)
        .self_signed(&root_key)
        .unwrap();
    let names: Vec<String> = (0..5)
        .map(|i| format!("CN=Bridge {i},O=Example,C=US"))
        .collect();
    let keys: Vec<KeyPair> = (0..5)
        .map(|_| KeyPair::generate(KeyAlgorithm::P256).unwrap())
        .collect();
    let selfs: Vec<Vec<u8>> = (0..5)
        .map(|i| ca(&names[i], &keys[i]).self_signed(&keys[i]).unwrap())
        .collect();
    let mut pool = Vec::new();
    for i in 0..5 {
        for j in 0..5 {
            if i == j {
                continue;
            }
            // Three current certificates of bridge j by bridge i.
            for n in 0..3 {
                pool.push(
                    ca(&names[j], &keys[j])
                        .validity(t - 86_400 * (n + 1), t + 365 * 86_400)
                        .sign(&selfs[i], &keys[i])
                        .unwrap(),
                );
            }
        }
    }
    for n in 0..3 {
        pool.push(
            ca(&names[4], &keys[4])
                .validity(t - 86_400 * (n + 1), t + 365 * 86_400)
                .sign(&root, &root_key)
                .unwrap(),
        );
    }
    let agency_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let agency = ca("CN=Agency,O=Example,C=US", &agency_key)
        .sign(&selfs[0], &keys[0])
        .unwrap();
    pool.push(agency.clone());
    let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let leaf = CertificateBuilder::new("CN=Agency Employee,O=Example,C=US", leaf_key.spki_der())
        .unwrap()
        .end_entity()
        .policies(&[p1])
        .sign(&agency, &agency_key)
        .unwrap();
    let mut b = TrustStore::builder();
    b.add_anchor_der(root);
    for c in &pool {
        b.add_intermediate_der(c.clone());
    }
    let s = b.build();
    let mut o = ValidationOptions {
        time: Time(t),
        ..ValidationOptions::default()
    };
    o.revocation.mode = pki::validate::RevocationMode::Off;
    o.initial_policy_set = vec![p2];
    o.initial_explicit_policy = true;
    let (r, w) = validate_counting(&s, &leaf, &[], &RevocationSet::empty(), &o);
    let err = r.expect_err("no path carries the required policy");
    assert_ne!(err.code(), "work-limit-exceeded", "{err}");
    assert!(!w.budget_exhausted, "{w:?}");
}
