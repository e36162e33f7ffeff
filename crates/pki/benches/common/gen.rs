//! Test-PKI generation for the `pki` benchmarks and robustness tests.
//!
//! Certificates and CRLs are assembled with `x509-cert` types and signed with
//! `aws-lc-rs`, so the data sets are real, verifiable X.509 (Federal PKI-like
//! subject names, SKI/AKI, basic constraints, key usage, certificate
//! policies, CRL distribution points) and any peer library can load them.
#![allow(dead_code)]

use std::str::FromStr;
use std::time::Duration;

use aws_lc_rs::digest;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, RSA_PKCS1_SHA256,
};
use der::asn1::{BitString, GeneralizedTime, Ia5String, ObjectIdentifier, OctetString, UtcTime};
use der::{Any, Decode, Encode};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use x509_cert::certificate::{Certificate, TbsCertificate, Version};
use x509_cert::crl::{CertificateList, RevokedCert, TbsCertList};
use x509_cert::ext::pkix::certpolicy::{CertificatePolicies, PolicyInformation};
use x509_cert::ext::pkix::crl::dp::DistributionPoint;
use x509_cert::ext::pkix::name::{DistributionPointName, GeneralName};
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, CrlDistributionPoints, CrlNumber, KeyUsage,
    KeyUsages, SubjectKeyIdentifier,
};
use x509_cert::ext::Extension;
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::time::{Time, Validity};

/// 2020-01-01T00:00:00Z.
pub const NOT_BEFORE: u64 = 1_577_836_800;
/// 2040-12-31T23:59:59Z.
pub const NOT_AFTER: u64 = 2_240_611_199;
/// 2026-06-01T00:00:00Z: the validation time used with generated data.
pub const VALIDATION_TIME: u64 = 1_780_272_000;

/// id-fpki-common-policy, id-fpki-common-hardware, id-fpki-common-authentication, id-fpki-certpcy-pivi-hardware.
pub const FPKI_POLICIES: [&str; 4] = [
    "2.16.840.1.101.3.2.1.3.6",
    "2.16.840.1.101.3.2.1.3.7",
    "2.16.840.1.101.3.2.1.3.13",
    "2.16.840.1.101.3.2.1.3.18",
];

const ECDSA_WITH_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const SHA256_WITH_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");

/// A signing key: P-256 or RSA-2048.
pub enum Key {
    P256(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

impl Key {
    pub fn p256() -> Key {
        Key::P256(EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).expect("P-256 keygen"))
    }

    pub fn rsa2048() -> Key {
        Key::Rsa(RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA keygen"))
    }

    /// SubjectPublicKeyInfo DER.
    pub fn spki_der(&self) -> Vec<u8> {
        match self {
            Key::P256(k) => k.public_key().as_der().expect("spki").as_ref().to_vec(),
            Key::Rsa(k) => k.public_key().as_der().expect("spki").as_ref().to_vec(),
        }
    }

    pub fn spki(&self) -> SubjectPublicKeyInfoOwned {
        SubjectPublicKeyInfoOwned::from_der(&self.spki_der()).expect("spki decodes")
    }

    /// RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits.
    pub fn key_id(&self) -> Vec<u8> {
        let spki = self.spki();
        digest::digest(
            &digest::SHA1_FOR_LEGACY_USE_ONLY,
            spki.subject_public_key.raw_bytes(),
        )
        .as_ref()
        .to_vec()
    }

    /// RSAPublicKey (PKCS#1) DER of an RSA key; empty for other keys.
    pub fn rsa_public_key_pkcs1(&self) -> Vec<u8> {
        match self {
            Key::Rsa(k) => k.public_key().as_ref().to_vec(),
            Key::P256(_) => Vec::new(),
        }
    }

    pub fn signature_algorithm(&self) -> AlgorithmIdentifierOwned {
        match self {
            Key::P256(_) => AlgorithmIdentifierOwned {
                oid: ECDSA_WITH_SHA256,
                parameters: None,
            },
            Key::Rsa(_) => AlgorithmIdentifierOwned {
                oid: SHA256_WITH_RSA,
                parameters: Some(Any::null()),
            },
        }
    }

    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            Key::P256(k) => k.sign(&rng, message).expect("sign").as_ref().to_vec(),
            Key::Rsa(k) => {
                let mut sig = vec![0; k.public_modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .expect("sign");
                sig
            }
        }
    }
}

/// An issuer: its name and key (and key identifier for AKI).
pub struct Issuer<'a> {
    pub name: &'a Name,
    pub key: &'a Key,
    pub key_id: Option<Vec<u8>>,
}

/// What to put in a certificate. `Default` is a CA certificate with the
/// Federal common policy, SKI by method 1 and 2020..2040 validity.
#[derive(Clone)]
pub struct CertSpec {
    pub subject: Name,
    pub serial: u64,
    pub not_before: u64,
    pub not_after: u64,
    /// `Some(path_len)` makes a CA (basicConstraints cA=TRUE, keyCertSign|cRLSign).
    pub ca: Option<Option<u8>>,
    pub policies: Vec<ObjectIdentifier>,
    /// `None`: no SubjectKeyIdentifier; `Some(empty)`: derived from the key.
    pub ski: Option<Vec<u8>>,
    /// Include the AuthorityKeyIdentifier from the issuer's key id.
    pub aki: bool,
    pub crl_dp: Option<String>,
}

impl CertSpec {
    pub fn ca(subject: &str, serial: u64) -> CertSpec {
        CertSpec {
            subject: name(subject),
            serial,
            not_before: NOT_BEFORE,
            not_after: NOT_AFTER,
            ca: Some(None),
            policies: vec![oid(FPKI_POLICIES[0])],
            ski: Some(Vec::new()),
            aki: true,
            crl_dp: None,
        }
    }

    pub fn end_entity(subject: &str, serial: u64) -> CertSpec {
        CertSpec {
            ca: None,
            policies: vec![oid(FPKI_POLICIES[2])],
            ..CertSpec::ca(subject, serial)
        }
    }
}

pub fn name(rfc4514: &str) -> Name {
    Name::from_str(rfc4514).expect("valid RFC 4514 name")
}

pub fn oid(s: &str) -> ObjectIdentifier {
    ObjectIdentifier::new_unwrap(s)
}

pub fn time(unix: u64) -> Time {
    let dt = der::DateTime::from_unix_duration(Duration::from_secs(unix)).expect("time in range");
    if dt.year() < 2050 {
        Time::UtcTime(UtcTime::from_date_time(dt).expect("utc time"))
    } else {
        Time::GeneralTime(GeneralizedTime::from_date_time(dt))
    }
}

fn extension(id: &str, critical: bool, value: &impl Encode) -> Extension {
    Extension {
        extn_id: oid(id),
        critical,
        extn_value: OctetString::new(value.to_der().expect("extension encodes"))
            .expect("octet string"),
    }
}

fn serial(n: u64) -> SerialNumber {
    // Positive, minimal big-endian integer contents.
    let bytes = n.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(7);
    let mut contents = bytes[first..].to_vec();
    if contents[0] & 0x80 != 0 {
        contents.insert(0, 0);
    }
    SerialNumber::new(&contents).expect("serial")
}

/// Issue a certificate for `subject_key`; `issuer: None` makes it self-signed.
pub fn issue(spec: &CertSpec, subject_key: &Key, issuer: Option<&Issuer<'_>>) -> Vec<u8> {
    let own_id;
    let (issuer_name, issuer_key, issuer_key_id) = match issuer {
        Some(i) => (i.name, i.key, i.key_id.clone()),
        None => {
            own_id = subject_key.key_id();
            (&spec.subject, subject_key, Some(own_id))
        }
    };
    let mut exts = Vec::new();
    if let Some(path_len) = spec.ca {
        exts.push(extension(
            "2.5.29.19",
            true,
            &BasicConstraints {
                ca: true,
                path_len_constraint: path_len,
            },
        ));
        exts.push(extension(
            "2.5.29.15",
            true,
            &KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign),
        ));
    } else {
        exts.push(extension(
            "2.5.29.15",
            true,
            &KeyUsage(KeyUsages::DigitalSignature.into()),
        ));
    }
    if let Some(ski) = &spec.ski {
        let value = if ski.is_empty() {
            subject_key.key_id()
        } else {
            ski.clone()
        };
        exts.push(extension(
            "2.5.29.14",
            false,
            &SubjectKeyIdentifier(OctetString::new(value).expect("ski")),
        ));
    }
    if spec.aki {
        if let Some(id) = issuer_key_id {
            exts.push(extension(
                "2.5.29.35",
                false,
                &AuthorityKeyIdentifier {
                    key_identifier: Some(OctetString::new(id).expect("aki")),
                    authority_cert_issuer: None,
                    authority_cert_serial_number: None,
                },
            ));
        }
    }
    if !spec.policies.is_empty() {
        exts.push(extension(
            "2.5.29.32",
            false,
            &CertificatePolicies(
                spec.policies
                    .iter()
                    .map(|p| PolicyInformation {
                        policy_identifier: *p,
                        policy_qualifiers: None,
                    })
                    .collect(),
            ),
        ));
    }
    if let Some(uri) = &spec.crl_dp {
        exts.push(extension(
            "2.5.29.31",
            false,
            &CrlDistributionPoints(vec![DistributionPoint {
                distribution_point: Some(DistributionPointName::FullName(vec![
                    GeneralName::UniformResourceIdentifier(Ia5String::new(uri).expect("uri")),
                ])),
                reasons: None,
                crl_issuer: None,
            }]),
        ));
    }
    let tbs = TbsCertificate {
        version: Version::V3,
        serial_number: serial(spec.serial),
        signature: issuer_key.signature_algorithm(),
        issuer: issuer_name.clone(),
        validity: Validity {
            not_before: time(spec.not_before),
            not_after: time(spec.not_after),
        },
        subject: spec.subject.clone(),
        subject_public_key_info: subject_key.spki(),
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(exts),
    };
    let tbs_der = tbs.to_der().expect("tbs encodes");
    let signature = issuer_key.sign(&tbs_der);
    Certificate {
        tbs_certificate: tbs,
        signature_algorithm: issuer_key.signature_algorithm(),
        signature: BitString::from_bytes(&signature).expect("signature"),
    }
    .to_der()
    .expect("certificate encodes")
}

/// Issue a v2 CRL with a CRL number and AKI; `revoked` is (serial, revocation time).
pub fn issue_crl(
    issuer: &Issuer<'_>,
    this_update: u64,
    next_update: u64,
    crl_number: u64,
    revoked: &[(u64, u64)],
) -> Vec<u8> {
    let mut exts = vec![extension(
        "2.5.29.20",
        false,
        &CrlNumber(der::asn1::Uint::new(&crl_number.to_be_bytes()).expect("crl number")),
    )];
    if let Some(id) = &issuer.key_id {
        exts.push(extension(
            "2.5.29.35",
            false,
            &AuthorityKeyIdentifier {
                key_identifier: Some(OctetString::new(id.clone()).expect("aki")),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
        ));
    }
    let revoked_certificates = if revoked.is_empty() {
        None
    } else {
        Some(
            revoked
                .iter()
                .map(|&(s, at)| RevokedCert {
                    serial_number: serial(s),
                    revocation_date: time(at),
                    crl_entry_extensions: None,
                })
                .collect(),
        )
    };
    let tbs = TbsCertList {
        version: Version::V2,
        signature: issuer.key.signature_algorithm(),
        issuer: issuer.name.clone(),
        this_update: time(this_update),
        next_update: Some(time(next_update)),
        revoked_certificates,
        crl_extensions: Some(exts),
    };
    let tbs_der = tbs.to_der().expect("tbs encodes");
    let signature = issuer.key.sign(&tbs_der);
    CertificateList {
        tbs_cert_list: tbs,
        signature_algorithm: issuer.key.signature_algorithm(),
        signature: BitString::from_bytes(&signature).expect("signature"),
    }
    .to_der()
    .expect("crl encodes")
}

pub fn pem(label: &str, der: &[u8]) -> String {
    der::pem::encode_string(label, der::pem::LineEnding::LF, der).expect("pem encodes")
}

/// Federal PKI-like CA subject names.
const AGENCIES: [&str; 12] = [
    "Department of Homeland Security",
    "Department of State",
    "Department of the Treasury",
    "Department of Veterans Affairs",
    "Department of Defense",
    "Department of Energy",
    "Department of Justice",
    "Department of Transportation",
    "Social Security Administration",
    "National Aeronautics and Space Administration",
    "Department of Health and Human Services",
    "Department of Agriculture",
];

pub fn fpki_ca_subject(i: usize) -> String {
    let agency = AGENCIES[i % AGENCIES.len()];
    format!(
        "CN={} CA {},OU=Certification Authorities,OU={},O=U.S. Government,C=US",
        agency.split_whitespace().last().unwrap_or("Federal"),
        i,
        agency
    )
}

/// `count` distinct CA certificates (DER): a few self-signed roots, the rest
/// issued by them (AKI = the root's SKI). Every certificate has its own
/// P-256 key except every fourth, which carries one of a small pool of
/// RSA-2048 keys (re-keyed/cross-certified CAs share keys in practice too).
pub fn ca_bundle(count: usize) -> Vec<Vec<u8>> {
    const ROOTS: usize = 4;
    let roots: Vec<(Name, Key, Vec<u8>)> = (0..ROOTS.min(count))
        .map(|r| {
            let key = Key::p256();
            let id = key.key_id();
            let name = name(&format!(
                "CN=Federal Common Policy CA G{},OU=FPKI,O=U.S. Government,C=US",
                r + 2
            ));
            (name, key, id)
        })
        .collect();
    let rsa_pool: Vec<Key> = if count > ROOTS {
        (0..4).map(|_| Key::rsa2048()).collect()
    } else {
        Vec::new()
    };
    let mut out = Vec::with_capacity(count);
    for (r, (name, key, _)) in roots.iter().enumerate() {
        let mut spec = CertSpec::ca("CN=x", r as u64 + 1);
        spec.subject = name.clone();
        spec.policies = FPKI_POLICIES.iter().map(|p| oid(p)).collect();
        out.push(issue(&spec, key, None));
    }
    for i in ROOTS..count {
        let (root_name, root_key, root_id) = &roots[i % ROOTS];
        let own;
        let key = if i % 4 == 0 {
            &rsa_pool[(i / 4) % rsa_pool.len()]
        } else {
            own = Key::p256();
            &own
        };
        let mut spec = CertSpec::ca(&fpki_ca_subject(i), 0x1000 + i as u64);
        spec.ca = Some(Some(0));
        spec.policies = vec![oid(FPKI_POLICIES[i % 4])];
        spec.crl_dp = Some(format!("http://crl.example.gov/ca{}.crl", i % 97));
        let issuer = Issuer {
            name: root_name,
            key: root_key,
            key_id: Some(root_id.clone()),
        };
        out.push(issue(&spec, key, Some(&issuer)));
    }
    out
}

/// A root → intermediate → leaf chain with a CRL from each CA (the root's
/// covers the intermediate, the intermediate's covers the leaf).
pub struct TestChain {
    pub root: Vec<u8>,
    pub intermediate: Vec<u8>,
    pub leaf: Vec<u8>,
    pub root_crl: Vec<u8>,
    pub intermediate_crl: Vec<u8>,
    pub leaf_serial: u64,
}

/// A Federal PKI-shaped RSA-2048 (or P-256) chain. The intermediate's CRL
/// lists `revoked_entries` other serials; with `revoke_leaf` the leaf is on it too.
pub fn chain(rsa: bool, revoked_entries: usize, revoke_leaf: bool) -> TestChain {
    chain_family(rsa, revoked_entries, revoke_leaf, 1)
        .pop()
        .expect("one chain")
}

/// `count` chains under one root that share the three keys but differ in
/// every signed object: intermediate and leaf certificates (serials) and both
/// CRLs (CRL numbers). Validating them in turn verifies fresh signatures each
/// time, whatever signature results a validator remembers.
pub fn chain_family(
    rsa: bool,
    revoked_entries: usize,
    revoke_leaf: bool,
    count: usize,
) -> Vec<TestChain> {
    let new_key = || if rsa { Key::rsa2048() } else { Key::p256() };
    let (root_key, int_key, leaf_key) = (new_key(), new_key(), new_key());
    let root_name = name("CN=Test Federal Common Policy CA,OU=FPKI,O=U.S. Government,C=US");
    let int_name = name(
        "CN=Test DHS CA4,OU=Certification Authorities,OU=Department of Homeland Security,O=U.S. Government,C=US",
    );
    let mut root_spec = CertSpec::ca("CN=x", 1);
    root_spec.subject = root_name.clone();
    root_spec.policies = FPKI_POLICIES.iter().map(|p| oid(p)).collect();
    let root = issue(&root_spec, &root_key, None);
    let root_issuer = Issuer {
        name: &root_name,
        key: &root_key,
        key_id: Some(root_key.key_id()),
    };
    let int_issuer = Issuer {
        name: &int_name,
        key: &int_key,
        key_id: Some(int_key.key_id()),
    };
    let this_update = VALIDATION_TIME - 86_400;
    let next_update = VALIDATION_TIME + 30 * 86_400;
    let root_revoked: Vec<(u64, u64)> = (0..10).map(|i| (0x3000 + i, NOT_BEFORE)).collect();
    (0..count as u64)
        .map(|k| {
            let mut int_spec = CertSpec::ca("CN=x", 0x2001 + k);
            int_spec.subject = int_name.clone();
            int_spec.ca = Some(Some(0));
            int_spec.policies = FPKI_POLICIES.iter().map(|p| oid(p)).collect();
            int_spec.crl_dp = Some("http://crl.example.gov/root.crl".into());
            let intermediate = issue(&int_spec, &int_key, Some(&root_issuer));
            let leaf_serial = 0x5eed_0000_0042 + k;
            let mut leaf_spec = CertSpec::end_entity(
                "CN=JOHN Q. PUBLIC 5016000001,OU=Department of Homeland Security,O=U.S. Government,C=US",
                leaf_serial,
            );
            leaf_spec.crl_dp = Some("http://crl.example.gov/dhsca4.crl".into());
            leaf_spec.not_after = 1_893_455_999; // 2029-12-31
            let leaf = issue(&leaf_spec, &leaf_key, Some(&int_issuer));
            let mut int_revoked: Vec<(u64, u64)> = (0..revoked_entries as u64)
                .map(|i| (0x7000_0000 + i * 7, NOT_BEFORE + i))
                .collect();
            if revoke_leaf {
                int_revoked.push((leaf_serial, VALIDATION_TIME - 3_600));
            }
            TestChain {
                root: root.clone(),
                intermediate,
                leaf,
                root_crl: issue_crl(&root_issuer, this_update, next_update, 7 + k, &root_revoked),
                intermediate_crl: issue_crl(
                    &int_issuer,
                    this_update,
                    next_update,
                    42 + k,
                    &int_revoked,
                ),
                leaf_serial,
            }
        })
        .collect()
}
