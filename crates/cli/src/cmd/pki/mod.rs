//! `pivgate pki ...`: verify certificate paths (RFC 5280 with the FIPS 201
//! profiles), CHUID signatures and the other signed objects, and run a test
//! PKI (init, issue-card, issue-device, revoke). The work is done by the
//! `pki` crate.

mod issue;
mod objects;
mod verify;

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum PkiCommand {
    /// Validate a certificate path (RFC 5280 + FIPS 201 profile).
    ///
    /// Prints VALID with the path (leaf first, trust anchor last) and the
    /// policy sets, or INVALID with the reason. Exit status: 0 valid,
    /// 1 invalid, 2 bad usage or unreadable input.
    Verify(verify::VerifyArgs),
    /// Verify the issuer signature of a CHUID (raw bytes as read from the
    /// card, with or without the 53 container) and validate its content
    /// signer. Exit status as for `verify`.
    VerifyChuid(verify::VerifyChuidArgs),
    /// Verify a Security Object (SP 800-73-4 §3.1.6): its signature by the
    /// content signer and the hash of each data group against the containers
    /// given. Exit status as for `verify`.
    VerifySecurityObject(objects::VerifySecurityObjectArgs),
    /// Verify the signature of a biometric container (Cardholder
    /// Fingerprints or Facial Image, SP 800-76-2 §9.2.2) and its card
    /// identifiers. Exit status as for `verify`.
    VerifyBiometric(objects::VerifyBiometricArgs),
    /// Create a test PKI in a directory: root CA, an issuing CA asserting
    /// the FIPS 201 policies, a CHUID content signer and empty CRLs.
    Init(issue::InitArgs),
    /// Issue one card's credentials from a test PKI: keys and certificates
    /// for slots 9A, 9C, 9D and 9E, and a signed CHUID.
    IssueCard(issue::IssueCardArgs),
    /// Issue a device certificate and key from a test PKI: a door reader's
    /// (TLS client authentication) or, with --server, the door service's
    /// (TLS server authentication, with its DNS names and IP addresses).
    IssueDevice(issue::IssueDeviceArgs),
    /// Revoke a certificate issued by a test PKI (re-signs the CRL of its
    /// issuer with the next CRL number).
    Revoke(issue::RevokeArgs),
    /// Re-issue a test PKI's CRLs with a fresh thisUpdate/nextUpdate (same
    /// entries, next CRL numbers), e.g. before the old ones go stale.
    RefreshCrls(issue::RefreshArgs),
    /// Write a bridged test PKI (a bridge cross-certified both ways with
    /// agency roots, SSP CAs, a second bridge, old and expired
    /// cross-certificates, unrelated roots) as PEM files: anchors/, pool.pem,
    /// crls.pem, leaves/ and leaves.tsv with each end entity's expected outcome.
    Mesh(MeshArgs),
}

#[derive(Args)]
pub struct MeshArgs {
    /// Where to write the mesh.
    out: PathBuf,
    /// About 60 CA certificates instead of over 300.
    #[arg(long)]
    small: bool,
}

pub fn run(cmd: PkiCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PkiCommand::Verify(a) => verify::verify(a),
        PkiCommand::VerifyChuid(a) => verify::verify_chuid_cmd(a),
        PkiCommand::VerifySecurityObject(a) => objects::verify_security_object_cmd(a),
        PkiCommand::VerifyBiometric(a) => objects::verify_biometric_cmd(a),
        PkiCommand::Init(a) => issue::init(a),
        PkiCommand::IssueCard(a) => issue::issue_card(a),
        PkiCommand::IssueDevice(a) => issue::issue_device(a),
        PkiCommand::Revoke(a) => issue::revoke(a),
        PkiCommand::RefreshCrls(a) => issue::refresh_crls(a),
        PkiCommand::Mesh(a) => {
            use pki_issue::mesh::{Mesh, MeshOptions};
            let opts = if a.small {
                MeshOptions::small()
            } else {
                MeshOptions::default()
            };
            let mesh = Mesh::generate(&opts)?;
            mesh.write(&a.out)?;
            println!("{}", pki_issue::report::mesh_line(&mesh, &a.out));
            Ok(ExitCode::SUCCESS)
        }
    }
}
