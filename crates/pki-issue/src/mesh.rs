//! A bridged test PKI shaped like the Federal PKI, for path-building tests, benchmarks and
//! demonstrations: a Common Policy root, a bridge CA cross-certified with it and with every
//! agency root both ways, commercial shared-service-provider (SSP) CAs under the Common Policy
//! root, a second (commercial) bridge with its own members, a re-keyed bridge whose old
//! cross-certificates are still in the pool, expired and superseded cross-certificates, and
//! unrelated self-signed roots (some named like real ones).
//!
//! Policies are mapped the way the bridge does it: each cross-certificate maps the issuer's
//! domain policy to the subject's (`policyMappings`), and the bridge's cross-certificates to
//! agencies carry name constraints (a directoryName subtree per agency).
//!
//! Every end entity has an expected outcome: a valid path of a known length (RFC 5280's `n`,
//! the trust anchor not counted) from a chosen anchor, or a known reason (the stable
//! [`code`](pki::error::ValidationError::code) of the error) why no path is valid. Keys are
//! P-256, so a default mesh (over 300 CA certificates) is generated in well under a second.
//!
//! ```
//! use pki_issue::mesh::{Mesh, MeshOptions};
//! let mesh = Mesh::generate(&MeshOptions::small()).unwrap();
//! assert!(mesh.cas().len() > 20);
//! ```

use super::builder::{CertificateBuilder, CrlBuilder, DAY};
use super::keys::{KeyAlgorithm, KeyPair};
use super::{pem_encode, IssueError};
use const_oid::ObjectIdentifier;
use std::collections::HashMap;
use std::path::Path;

/// id-fpki-common-hardware.
pub const POLICY_COMMON_HARDWARE: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.3.7");
/// id-fpki-common-authentication.
pub const POLICY_COMMON_AUTHENTICATION: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.3.13");
/// id-fpki-certpcy-mediumHardware (the bridge's domain policy).
pub const POLICY_BRIDGE_MEDIUM_HARDWARE: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.3.12");

const O: &str = "O=U.S. Government,C=US";
const COMMON: &str = "CN=Federal Common Policy CA G2,OU=FPKI,O=U.S. Government,C=US";
const BRIDGE: &str = "CN=Federal Bridge CA G4,OU=FPKI,O=U.S. Government,C=US";
const COMMERCIAL_BRIDGE: &str = "CN=Commercial Bridge CA,O=Commercial Bridge Inc.,C=US";

/// The domain policy of agency `i` (hardware assurance; mapped by the bridge).
pub fn agency_policy(i: usize) -> ObjectIdentifier {
    oid(&format!("2.16.840.1.101.3.2.1.48.{}.1", 100 + i))
}

/// An agency policy of lower assurance that no cross-certificate maps.
pub fn agency_basic_policy(i: usize) -> ObjectIdentifier {
    oid(&format!("2.16.840.1.101.3.2.1.48.{}.2", 100 + i))
}

/// The commercial bridge's domain policy.
pub fn commercial_bridge_policy() -> ObjectIdentifier {
    oid("1.3.6.1.4.1.99999.1.1")
}

/// The domain policy of commercial-bridge member `m`.
pub fn member_policy(m: usize) -> ObjectIdentifier {
    oid(&format!("1.3.6.1.4.1.99999.2.{}.1", m + 1))
}

fn oid(s: &str) -> ObjectIdentifier {
    ObjectIdentifier::new(s).expect("the mesh policy OIDs are well formed")
}

/// The size of a generated mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshOptions {
    /// Agency root CAs cross-certified with the bridge both ways (at least 8).
    pub agencies: usize,
    /// Issuing CAs under each agency root.
    pub issuing_per_agency: usize,
    /// Shared-service-provider CAs under the Common Policy root.
    pub ssps: usize,
    /// Issuing CAs under each SSP CA.
    pub issuing_per_ssp: usize,
    /// Members of the commercial bridge (cross-certified with it both ways).
    pub bridge_members: usize,
    /// Issuing CAs under each commercial-bridge member.
    pub issuing_per_member: usize,
    /// Unrelated self-signed roots in the pool (half of them named like real CAs).
    pub unrelated_roots: usize,
}

impl Default for MeshOptions {
    /// Over 300 CA certificates.
    fn default() -> Self {
        MeshOptions {
            agencies: 20,
            issuing_per_agency: 6,
            ssps: 6,
            issuing_per_ssp: 4,
            bridge_members: 8,
            issuing_per_member: 4,
            unrelated_roots: 12,
        }
    }
}

impl MeshOptions {
    /// A small mesh (about 60 CA certificates) with every kind of case.
    pub fn small() -> Self {
        MeshOptions {
            agencies: 8,
            issuing_per_agency: 2,
            ssps: 2,
            issuing_per_ssp: 2,
            bridge_members: 2,
            issuing_per_member: 1,
            unrelated_roots: 4,
        }
    }
}

/// The trust anchor an end entity is validated from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeshAnchor {
    /// The self-signed Common Policy root.
    CommonPolicy,
    /// The self-signed root of agency `i`.
    Agency(usize),
}

impl MeshAnchor {
    /// A file-name-friendly label: `common-policy`, `agency-3`.
    pub fn label(&self) -> String {
        match self {
            MeshAnchor::CommonPolicy => "common-policy".into(),
            MeshAnchor::Agency(i) => format!("agency-{i}"),
        }
    }
}

/// What validating an end entity must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A valid path of `depth` certificates (end entity included, trust anchor not), the
    /// shortest there is.
    Valid { depth: usize },
    /// No valid path, for the reason with this stable error code.
    Invalid { code: &'static str },
}

/// One certificate of the mesh with a short unique label (used as a file name).
#[derive(Debug, Clone)]
pub struct MeshCert {
    pub label: String,
    pub der: Vec<u8>,
}

/// An end entity with the anchor and policy it is validated with and the expected outcome.
#[derive(Debug, Clone)]
pub struct MeshLeaf {
    pub label: String,
    pub der: Vec<u8>,
    pub anchor: MeshAnchor,
    /// The acceptable policy (user-initial-policy-set, with initial-explicit-policy set).
    pub policy: ObjectIdentifier,
    pub expect: Expect,
    /// One sentence on why the outcome is what it is.
    pub why: &'static str,
}

/// A generated bridged mesh. See the module documentation.
#[derive(Debug)]
pub struct Mesh {
    time: i64,
    cas: Vec<MeshCert>,
    crls: Vec<MeshCert>,
    anchors: HashMap<MeshAnchor, Vec<u8>>,
    leaves: Vec<MeshLeaf>,
}

/// A CA: a name and a key, and the certificate that names it in its own domain.
struct Ca {
    name: String,
    key: KeyPair,
    /// A certificate holding this name and key, used to sign under it.
    cert: Vec<u8>,
    revoked: Vec<Vec<u8>>,
    publishes_crl: bool,
}

struct Gen {
    time: i64,
    serial: u64,
    cas: Vec<MeshCert>,
    leaves: Vec<MeshLeaf>,
}

impl Gen {
    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    fn key() -> Result<KeyPair, IssueError> {
        KeyPair::generate(KeyAlgorithm::P256)
    }

    fn push(&mut self, label: String, der: &[u8]) {
        self.cas.push(MeshCert {
            label,
            der: der.to_vec(),
        });
    }

    /// A self-signed root, kept in the pool.
    fn root(&mut self, label: &str, name: &str) -> Result<Ca, IssueError> {
        let key = Self::key()?;
        let t = self.time;
        let cert = CertificateBuilder::new(name, key.spki_der())?
            .serial(self.next_serial())
            .validity(t - 2 * 365 * DAY, t + 20 * 365 * DAY)
            .ca(None)
            .self_signed(&key)?;
        self.push(label.to_string(), &cert);
        Ok(Ca {
            name: name.to_string(),
            key,
            cert,
            revoked: Vec::new(),
            publishes_crl: true,
        })
    }

    /// `issuer` certifies (`name`, `key`): a subordinate or cross-certificate.
    #[allow(clippy::too_many_arguments)]
    fn certify(
        &mut self,
        label: String,
        issuer: &Ca,
        name: &str,
        key: &KeyPair,
        policies: &[ObjectIdentifier],
        mappings: &[(ObjectIdentifier, ObjectIdentifier)],
        permitted: Option<&str>,
        validity: (i64, i64),
    ) -> Result<Vec<u8>, IssueError> {
        let mut b = CertificateBuilder::new(name, key.spki_der())?
            .serial(self.next_serial())
            .validity(validity.0, validity.1)
            .ca(None)
            .policies(policies);
        if !mappings.is_empty() {
            b = b.policy_mappings(mappings);
        }
        if let Some(p) = permitted {
            b = b.name_constraints(&[p], &[])?;
        }
        let der = b.sign(&issuer.cert, &issuer.key)?;
        self.push(label, &der);
        Ok(der)
    }

    fn ca_validity(&self) -> (i64, i64) {
        (self.time - 365 * DAY, self.time + 10 * 365 * DAY)
    }

    /// A subordinate CA of `issuer` asserting `policies`.
    fn subordinate(
        &mut self,
        label: &str,
        issuer: &Ca,
        name: &str,
        policies: &[ObjectIdentifier],
        validity: (i64, i64),
    ) -> Result<Ca, IssueError> {
        let key = Self::key()?;
        let cert = self.certify(
            label.to_string(),
            issuer,
            name,
            &key,
            policies,
            &[],
            None,
            validity,
        )?;
        Ok(Ca {
            name: name.to_string(),
            key,
            cert,
            revoked: Vec::new(),
            publishes_crl: true,
        })
    }

    /// An end entity issued by `issuer`; returns its DER and serial.
    fn leaf(
        &mut self,
        issuer: &Ca,
        name: &str,
        policy: ObjectIdentifier,
    ) -> Result<(Vec<u8>, Vec<u8>), IssueError> {
        let key = Self::key()?;
        let serial = self.next_serial();
        let t = self.time;
        let der = CertificateBuilder::new(name, key.spki_der())?
            .serial(serial)
            .validity(t - 30 * DAY, t + 365 * DAY)
            .end_entity()
            .policies(&[policy])
            .sign(&issuer.cert, &issuer.key)?;
        let bytes = serial.to_be_bytes();
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(7);
        let mut s = bytes[first..].to_vec();
        if s[0] & 0x80 != 0 {
            s.insert(0, 0);
        }
        Ok((der, s))
    }

    #[allow(clippy::too_many_arguments)]
    fn add_leaf(
        &mut self,
        issuer: &Ca,
        label: String,
        name: &str,
        cert_policy: ObjectIdentifier,
        anchor: MeshAnchor,
        policy: ObjectIdentifier,
        expect: Expect,
        why: &'static str,
    ) -> Result<Vec<u8>, IssueError> {
        let (der, serial) = self.leaf(issuer, name, cert_policy)?;
        self.leaves.push(MeshLeaf {
            label,
            der,
            anchor,
            policy,
            expect,
            why,
        });
        Ok(serial)
    }
}

fn agency_name(i: usize) -> String {
    format!("OU=Agency {i},{O}")
}

impl Mesh {
    /// Generates a mesh valid around the current time.
    pub fn generate(opts: &MeshOptions) -> Result<Mesh, IssueError> {
        Mesh::generate_at(opts, super::builder::now())
    }

    /// Generates a mesh to be validated at `time` (seconds since the epoch).
    pub fn generate_at(opts: &MeshOptions, time: i64) -> Result<Mesh, IssueError> {
        if opts.agencies < 8 || opts.issuing_per_agency < 1 || opts.ssps < 1 {
            return Err(IssueError::Invalid(
                "a mesh needs at least 8 agencies, one issuing CA each and one SSP".into(),
            ));
        }
        let t = time;
        let mut g = Gen {
            time: t,
            serial: 0x1000,
            cas: Vec::new(),
            leaves: Vec::new(),
        };
        let valid = g.ca_validity();
        let expired = (t - 3 * 365 * DAY, t - 30 * DAY);
        let (hw, auth, bmh) = (
            POLICY_COMMON_HARDWARE,
            POLICY_COMMON_AUTHENTICATION,
            POLICY_BRIDGE_MEDIUM_HARDWARE,
        );

        // The Common Policy root and the bridge, cross-certified both ways.
        let common = g.root("common-policy", COMMON)?;
        let bridge_key = Gen::key()?;
        let bridge_cert = g.certify(
            "bridge-by-common".into(),
            &common,
            BRIDGE,
            &bridge_key,
            &[hw, auth],
            &[(hw, bmh), (auth, bmh)],
            None,
            valid,
        )?;
        let bridge = Ca {
            name: BRIDGE.into(),
            key: bridge_key,
            cert: bridge_cert,
            revoked: Vec::new(),
            publishes_crl: true,
        };
        g.certify(
            "common-by-bridge".into(),
            &bridge,
            COMMON,
            &common.key,
            &[bmh],
            &[(bmh, hw)],
            None,
            valid,
        )?;
        // The bridge before its re-key: same name, old key. Its certificate from the Common
        // Policy root has expired; its cross-certificates with some agencies are still valid.
        let old_key = Gen::key()?;
        let old_cert = g.certify(
            "bridge-old-key-by-common".into(),
            &common,
            BRIDGE,
            &old_key,
            &[hw, auth],
            &[(hw, bmh), (auth, bmh)],
            None,
            expired,
        )?;
        let old_bridge = Ca {
            name: BRIDGE.into(),
            key: old_key,
            cert: old_cert,
            revoked: Vec::new(),
            publishes_crl: true,
        };
        g.certify(
            "common-by-bridge-old-key".into(),
            &old_bridge,
            COMMON,
            &common.key,
            &[bmh],
            &[(bmh, hw)],
            None,
            expired,
        )?;

        // Agencies: a root cross-certified with the bridge both ways (the bridge's
        // cross-certificate constrains the agency to its own subtree), issuing CAs below.
        let mut agencies: Vec<Ca> = Vec::new();
        let mut issuing: Vec<Vec<Ca>> = Vec::new();
        for i in 0..opts.agencies {
            let subtree = agency_name(i);
            let name = format!("CN=Agency {i} Root CA,{subtree}");
            let root = g.root(&format!("agency-{i}-root"), &name)?;
            let p = agency_policy(i);
            let nc = Some(subtree.as_str());
            g.certify(
                format!("agency-{i}-by-bridge"),
                &bridge,
                &name,
                &root.key,
                &[bmh],
                &[(bmh, p)],
                nc,
                valid,
            )?;
            g.certify(
                format!("bridge-by-agency-{i}"),
                &root,
                BRIDGE,
                &bridge.key,
                &[p],
                &[(p, bmh)],
                None,
                valid,
            )?;
            if i % 4 == 1 {
                // A superseded cross-certificate from the bridge, expired.
                g.certify(
                    format!("agency-{i}-by-bridge-expired"),
                    &bridge,
                    &name,
                    &root.key,
                    &[bmh],
                    &[(bmh, p)],
                    nc,
                    expired,
                )?;
            }
            if i % 3 == 0 {
                // Cross-certificates with the bridge's old key, issued before the re-key and
                // still in the pool.
                let older = (t - 3 * 365 * DAY, t + 2 * 365 * DAY);
                g.certify(
                    format!("agency-{i}-by-bridge-old-key"),
                    &old_bridge,
                    &name,
                    &root.key,
                    &[bmh],
                    &[(bmh, p)],
                    nc,
                    older,
                )?;
                g.certify(
                    format!("bridge-old-key-by-agency-{i}"),
                    &root,
                    BRIDGE,
                    &old_bridge.key,
                    &[p],
                    &[(p, bmh)],
                    None,
                    older,
                )?;
            }
            let mut cas = Vec::new();
            for j in 0..opts.issuing_per_agency {
                cas.push(g.subordinate(
                    &format!("agency-{i}-issuing-{j}"),
                    &root,
                    &format!("CN=Agency {i} Issuing CA {j},{subtree}"),
                    &[p, agency_basic_policy(i)],
                    valid,
                )?);
            }
            agencies.push(root);
            issuing.push(cas);
        }

        // SSPs: subordinate to the Common Policy root, asserting its policies directly.
        let mut ssps: Vec<Ca> = Vec::new();
        let mut ssp_issuing: Vec<Vec<Ca>> = Vec::new();
        for s in 0..opts.ssps {
            let org = format!("O=Shared Service Provider {s} Inc.,C=US");
            let ca = g.subordinate(
                &format!("ssp-{s}"),
                &common,
                &format!("CN=SSP {s} CA,{org}"),
                &[hw, auth],
                valid,
            )?;
            let mut cas = Vec::new();
            for j in 0..opts.issuing_per_ssp {
                cas.push(g.subordinate(
                    &format!("ssp-{s}-issuing-{j}"),
                    &ca,
                    &format!("CN=SSP {s} Issuing CA {j},{org}"),
                    &[hw, auth],
                    valid,
                )?);
            }
            ssps.push(ca);
            ssp_issuing.push(cas);
        }

        // The commercial bridge, cross-certified with the federal bridge both ways, and its
        // members cross-certified with it both ways.
        let cbp = commercial_bridge_policy();
        let cb_key = Gen::key()?;
        let cb_cert = g.certify(
            "commercial-bridge-by-bridge".into(),
            &bridge,
            COMMERCIAL_BRIDGE,
            &cb_key,
            &[bmh],
            &[(bmh, cbp)],
            None,
            valid,
        )?;
        let cb = Ca {
            name: COMMERCIAL_BRIDGE.into(),
            key: cb_key,
            cert: cb_cert,
            revoked: Vec::new(),
            publishes_crl: true,
        };
        g.certify(
            "bridge-by-commercial-bridge".into(),
            &cb,
            BRIDGE,
            &bridge.key,
            &[cbp],
            &[(cbp, bmh)],
            None,
            valid,
        )?;
        let mut members: Vec<Ca> = Vec::new();
        let mut member_issuing: Vec<Vec<Ca>> = Vec::new();
        for m in 0..opts.bridge_members {
            let org = format!("O=Member {m} Corp.,C=US");
            let name = format!("CN=Member {m} Root CA,{org}");
            let root = g.root(&format!("member-{m}-root"), &name)?;
            let mp = member_policy(m);
            g.certify(
                format!("member-{m}-by-commercial-bridge"),
                &cb,
                &name,
                &root.key,
                &[cbp],
                &[(cbp, mp)],
                None,
                valid,
            )?;
            g.certify(
                format!("commercial-bridge-by-member-{m}"),
                &root,
                COMMERCIAL_BRIDGE,
                &cb.key,
                &[mp],
                &[(mp, cbp)],
                None,
                valid,
            )?;
            let mut cas = Vec::new();
            for j in 0..opts.issuing_per_member {
                cas.push(g.subordinate(
                    &format!("member-{m}-issuing-{j}"),
                    &root,
                    &format!("CN=Member {m} Issuing CA {j},{org}"),
                    &[mp],
                    valid,
                )?);
            }
            members.push(root);
            member_issuing.push(cas);
        }

        // Unrelated self-signed roots; half of them carry the name of a real CA of the mesh
        // (another key), one of those without key identifiers.
        let mut impostor_common: Option<Ca> = None;
        for u in 0..opts.unrelated_roots {
            let (label, name) = match u % 2 {
                0 => {
                    let name = match u / 2 % 4 {
                        0 => COMMON.to_string(),
                        1 => BRIDGE.to_string(),
                        2 => format!("CN=Agency 2 Root CA,{}", agency_name(2)),
                        _ => format!("CN=Agency {u} Issuing CA 0,{}", agency_name(u)),
                    };
                    (format!("unrelated-{u}-same-name"), name)
                }
                _ => (
                    format!("unrelated-{u}"),
                    format!("CN=Unrelated Root CA {u},O=Example {u} Ltd.,C=GB"),
                ),
            };
            let key = Gen::key()?;
            let cert = CertificateBuilder::new(&name, key.spki_der())?
                .serial(g.next_serial())
                .validity(valid.0, valid.1)
                .ca(None)
                .subject_key_id(u != 4)
                .self_signed(&key)?;
            g.push(label, &cert);
            if u == 0 {
                impostor_common = Some(Ca {
                    name,
                    key,
                    cert,
                    revoked: Vec::new(),
                    publishes_crl: false,
                });
            }
        }

        // Valid end entities.
        let common_anchor = MeshAnchor::CommonPolicy;
        for i in 0..opts.agencies {
            let ca = &issuing[i][i % opts.issuing_per_agency];
            let name = format!("CN=Agency {i} Employee,{}", agency_name(i));
            g.add_leaf(
                ca,
                format!("agency-{i}-employee"),
                &name,
                agency_policy(i),
                common_anchor,
                hw,
                Expect::Valid { depth: 4 },
                "issuing CA, agency root (bridge cross), bridge (Common Policy cross)",
            )?;
        }
        for (i, cas) in issuing.iter().enumerate().take(3) {
            let name = format!("CN=Agency {i} Contractor,{}", agency_name(i));
            g.add_leaf(
                &cas[0],
                format!("agency-{i}-contractor-own-root"),
                &name,
                agency_policy(i),
                MeshAnchor::Agency(i),
                agency_policy(i),
                Expect::Valid { depth: 2 },
                "issuing CA, then the agency's own root",
            )?;
        }
        for (i, cas) in issuing.iter().enumerate().take(4).skip(1) {
            // An agency trusting its own root reaches the others through the bridge.
            let name = format!("CN=Agency {i} Visitor,{}", agency_name(i));
            g.add_leaf(
                &cas[0],
                format!("agency-{i}-visitor-from-agency-0"),
                &name,
                agency_policy(i),
                MeshAnchor::Agency(0),
                agency_policy(0),
                Expect::Valid { depth: 4 },
                "issuing CA, agency root (bridge cross), bridge (agency 0 cross)",
            )?;
        }
        for (s, cas) in ssp_issuing.iter().enumerate() {
            let name = format!("CN=SSP {s} Subscriber,O=Shared Service Provider {s} Inc.,C=US");
            g.add_leaf(
                &cas[s % cas.len().max(1)],
                format!("ssp-{s}-subscriber"),
                &name,
                hw,
                common_anchor,
                hw,
                Expect::Valid { depth: 3 },
                "SSP issuing CA, SSP CA",
            )?;
        }
        g.add_leaf(
            &ssps[0],
            "ssp-0-direct".into(),
            "CN=SSP 0 Direct Subscriber,O=Shared Service Provider 0 Inc.,C=US",
            auth,
            common_anchor,
            auth,
            Expect::Valid { depth: 2 },
            "SSP CA",
        )?;
        for (m, cas) in member_issuing.iter().enumerate().take(2) {
            let name = format!("CN=Member {m} Subscriber,O=Member {m} Corp.,C=US");
            g.add_leaf(
                &cas[0],
                format!("member-{m}-subscriber"),
                &name,
                member_policy(m),
                common_anchor,
                hw,
                Expect::Valid { depth: 5 },
                "member issuing CA, member root (commercial bridge cross), commercial bridge, bridge",
            )?;
        }

        // Invalid end entities, each with one true reason.
        let revoked_serial = g.add_leaf(
            &issuing[2][0],
            "agency-2-revoked".into(),
            &format!("CN=Agency 2 Former Employee,{}", agency_name(2)),
            agency_policy(2),
            common_anchor,
            hw,
            Expect::Invalid {
                code: "certificate-revoked",
            },
            "the issuing CA's CRL lists it",
        )?;
        issuing[2][0].revoked.push(revoked_serial);

        let expired_ca = g.subordinate(
            "agency-3-expired-issuing",
            &agencies[3],
            &format!("CN=Agency 3 Retired Issuing CA,{}", agency_name(3)),
            &[agency_policy(3)],
            expired,
        )?;
        g.add_leaf(
            &expired_ca,
            "agency-3-under-expired-ca".into(),
            &format!("CN=Agency 3 Employee Of Retired CA,{}", agency_name(3)),
            agency_policy(3),
            common_anchor,
            hw,
            Expect::Invalid {
                code: "certificate-expired",
            },
            "its issuing CA, on every path, has expired",
        )?;

        g.add_leaf(
            &issuing[4][0],
            "agency-4-outside-its-subtree".into(),
            &format!("CN=Agency 5 Impersonator,{}", agency_name(5)),
            agency_policy(4),
            common_anchor,
            hw,
            Expect::Invalid {
                code: "name-constraints-violated",
            },
            "agency 4 issued a name in agency 5's subtree; the bridge constrains agency 4",
        )?;

        let basic = g.subordinate(
            "agency-5-basic-assurance",
            &agencies[5],
            &format!("CN=Agency 5 Basic Assurance CA,{}", agency_name(5)),
            &[agency_basic_policy(5)],
            valid,
        )?;
        g.add_leaf(
            &basic,
            "agency-5-basic-assurance".into(),
            &format!("CN=Agency 5 Basic Subscriber,{}", agency_name(5)),
            agency_basic_policy(5),
            common_anchor,
            hw,
            Expect::Invalid {
                code: "no-acceptable-policy",
            },
            "its policy is mapped by no cross-certificate",
        )?;

        let mut unpublished = g.subordinate(
            "agency-6-unpublished-crl",
            &agencies[6],
            &format!("CN=Agency 6 Unpublished CA,{}", agency_name(6)),
            &[agency_policy(6)],
            valid,
        )?;
        unpublished.publishes_crl = false;
        g.add_leaf(
            &unpublished,
            "agency-6-no-crl".into(),
            &format!("CN=Agency 6 Employee,{}", agency_name(6)),
            agency_policy(6),
            common_anchor,
            hw,
            Expect::Invalid {
                code: "revocation-unavailable",
            },
            "its issuing CA publishes no CRL",
        )?;

        let revoked_ca = g.subordinate(
            "agency-7-revoked-issuing",
            &agencies[7],
            &format!("CN=Agency 7 Compromised CA,{}", agency_name(7)),
            &[agency_policy(7)],
            valid,
        )?;
        let serial = serial_of(&revoked_ca.cert);
        agencies[7].revoked.push(serial);
        g.add_leaf(
            &revoked_ca,
            "agency-7-under-revoked-ca".into(),
            &format!("CN=Agency 7 Employee,{}", agency_name(7)),
            agency_policy(7),
            common_anchor,
            hw,
            Expect::Invalid {
                code: "certificate-revoked",
            },
            "the agency root's CRL lists its issuing CA",
        )?;

        // An issuing CA that is in no pool.
        let orphan_root = Ca {
            name: "CN=Orphan Root CA,O=Nowhere,C=US".into(),
            key: Gen::key()?,
            cert: Vec::new(),
            revoked: Vec::new(),
            publishes_crl: false,
        };
        let orphan_cert = CertificateBuilder::new(&orphan_root.name, orphan_root.key.spki_der())?
            .ca(None)
            .self_signed(&orphan_root.key)?;
        let orphan = Ca {
            cert: orphan_cert,
            ..orphan_root
        };
        g.add_leaf(
            &orphan,
            "orphan".into(),
            "CN=Orphan Subscriber,O=Nowhere,C=US",
            hw,
            common_anchor,
            hw,
            Expect::Invalid {
                code: "no-path-to-anchor",
            },
            "its issuer is nowhere in the pool",
        )?;
        if let Some(impostor) = &impostor_common {
            g.add_leaf(
                impostor,
                "impostor-common-policy".into(),
                "CN=Impostor Subscriber,O=Example,C=US",
                hw,
                common_anchor,
                hw,
                Expect::Invalid {
                    code: "no-path-to-anchor",
                },
                "its issuer only shares the Common Policy root's name",
            )?;
        }

        // CRLs: every CA key publishes one (except the one that does not).
        let mut crls = Vec::new();
        let mut all: Vec<(&str, &Ca)> = vec![
            ("common-policy", &common),
            ("bridge", &bridge),
            ("bridge-old-key", &old_bridge),
            ("commercial-bridge", &cb),
            ("agency-3-expired-issuing", &expired_ca),
            ("agency-5-basic-assurance", &basic),
            ("agency-6-unpublished-crl", &unpublished),
            ("agency-7-revoked-issuing", &revoked_ca),
        ];
        let labels: Vec<String> = (0..opts.agencies)
            .map(|i| format!("agency-{i}-root"))
            .chain((0..opts.ssps).map(|s| format!("ssp-{s}")))
            .chain((0..opts.bridge_members).map(|m| format!("member-{m}-root")))
            .collect();
        let groups: Vec<&Ca> = agencies.iter().chain(&ssps).chain(&members).collect();
        for (l, ca) in labels.iter().zip(&groups) {
            all.push((l.as_str(), ca));
        }
        let mut issuing_labels = Vec::new();
        for (i, cas) in issuing.iter().enumerate() {
            for (j, ca) in cas.iter().enumerate() {
                issuing_labels.push((format!("agency-{i}-issuing-{j}"), ca));
            }
        }
        for (s, cas) in ssp_issuing.iter().enumerate() {
            for (j, ca) in cas.iter().enumerate() {
                issuing_labels.push((format!("ssp-{s}-issuing-{j}"), ca));
            }
        }
        for (m, cas) in member_issuing.iter().enumerate() {
            for (j, ca) in cas.iter().enumerate() {
                issuing_labels.push((format!("member-{m}-issuing-{j}"), ca));
            }
        }
        for (l, ca) in &issuing_labels {
            all.push((l.as_str(), ca));
        }
        for (label, ca) in all {
            if !ca.publishes_crl {
                continue;
            }
            let mut b = CrlBuilder::new()
                .update_times(t - 3600, Some(t + 7 * DAY))
                .crl_number(1);
            for s in &ca.revoked {
                b = b.revoke(s, t - 7200, None);
            }
            crls.push(MeshCert {
                label: label.to_string(),
                der: b.sign(&ca.cert, &ca.key)?,
            });
        }

        let mut anchors = HashMap::new();
        let find = |label: &str| {
            g.cas
                .iter()
                .find(|c| c.label == label)
                .map(|c| c.der.clone())
                .expect("the anchors are in the pool")
        };
        anchors.insert(MeshAnchor::CommonPolicy, find("common-policy"));
        for i in 0..opts.agencies {
            anchors.insert(MeshAnchor::Agency(i), find(&format!("agency-{i}-root")));
        }
        Ok(Mesh {
            time: t,
            cas: g.cas,
            crls,
            anchors,
            leaves: g.leaves,
        })
    }

    /// The validation time the mesh was generated for (seconds since the epoch).
    pub fn time(&self) -> i64 {
        self.time
    }

    /// Every CA certificate of the pool, anchors' self-signed certificates included.
    pub fn cas(&self) -> &[MeshCert] {
        &self.cas
    }

    /// Every CRL, labelled by the CA that signed it.
    pub fn crls(&self) -> &[MeshCert] {
        &self.crls
    }

    /// The end entities and their expected outcomes.
    pub fn leaves(&self) -> &[MeshLeaf] {
        &self.leaves
    }

    /// The self-signed certificate of `anchor`.
    pub fn anchor(&self, anchor: MeshAnchor) -> &[u8] {
        &self.anchors[&anchor]
    }

    /// The pool as seen from `anchor`: every CA certificate but the anchor's own.
    pub fn pool_without(&self, anchor: MeshAnchor) -> Vec<&[u8]> {
        let a = self.anchor(anchor);
        self.cas
            .iter()
            .map(|c| c.der.as_slice())
            .filter(|d| *d != a)
            .collect()
    }

    /// Writes the mesh as PEM files under `dir`: `anchors/<anchor>.pem`, `pool.pem` (every CA
    /// certificate), `crls.pem`, `leaves/<label>.pem`, and `leaves.tsv` (label, anchor,
    /// policy, expected outcome: `valid:<depth>` or the error code).
    pub fn write(&self, dir: &Path) -> Result<(), IssueError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| IssueError::Io { path, source }
        };
        let write = |path: &Path, data: String| std::fs::write(path, data).map_err(io(path));
        for sub in ["anchors", "leaves"] {
            let d = dir.join(sub);
            std::fs::create_dir_all(&d).map_err(io(&d))?;
        }
        for (a, der) in &self.anchors {
            write(
                &dir.join("anchors").join(format!("{}.pem", a.label())),
                pem_encode("CERTIFICATE", der),
            )?;
        }
        let pool: String = self
            .cas
            .iter()
            .map(|c| pem_encode("CERTIFICATE", &c.der))
            .collect();
        write(&dir.join("pool.pem"), pool)?;
        let crls: String = self
            .crls
            .iter()
            .map(|c| pem_encode("X509 CRL", &c.der))
            .collect();
        write(&dir.join("crls.pem"), crls)?;
        let mut tsv = String::from("label\tanchor\tpolicy\texpect\n");
        for l in &self.leaves {
            write(
                &dir.join("leaves").join(format!("{}.pem", l.label)),
                pem_encode("CERTIFICATE", &l.der),
            )?;
            let expect = match l.expect {
                Expect::Valid { depth } => format!("valid:{depth}"),
                Expect::Invalid { code } => code.to_string(),
            };
            tsv.push_str(&format!(
                "{}\t{}\t{}\t{}\n",
                l.label,
                l.anchor.label(),
                l.policy,
                expect
            ));
        }
        write(&dir.join("leaves.tsv"), tsv)
    }
}

/// The serial number contents of a certificate this module issued.
fn serial_of(der: &[u8]) -> Vec<u8> {
    use der::Decode;
    x509_cert::Certificate::from_der(der)
        .map(|c| c.tbs_certificate.serial_number.as_bytes().to_vec())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_mesh_has_over_300_cas_and_every_kind_of_case() {
        let mesh = Mesh::generate(&MeshOptions::default()).unwrap();
        assert!(mesh.cas().len() >= 300, "{} CAs", mesh.cas().len());
        let codes: Vec<&str> = mesh
            .leaves()
            .iter()
            .filter_map(|l| match l.expect {
                Expect::Invalid { code } => Some(code),
                Expect::Valid { .. } => None,
            })
            .collect();
        for code in [
            "certificate-revoked",
            "certificate-expired",
            "name-constraints-violated",
            "no-acceptable-policy",
            "revocation-unavailable",
            "no-path-to-anchor",
        ] {
            assert!(codes.contains(&code), "no case for {code}");
        }
        for depth in 2..=4 {
            assert!(
                mesh.leaves()
                    .iter()
                    .any(|l| l.expect == Expect::Valid { depth }),
                "no valid leaf at depth {depth}"
            );
        }
        let mut labels: Vec<&str> = mesh.cas().iter().map(|c| c.label.as_str()).collect();
        labels.sort_unstable();
        let n = labels.len();
        labels.dedup();
        assert_eq!(labels.len(), n, "CA labels are unique");
    }
}
