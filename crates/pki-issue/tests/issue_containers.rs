//! The containers of an issued card (SP 800-73-4 Table 3): every signed
//! object verifies, with pivgate's verifier and with OpenSSL's `cms -verify`
//! as an independent peer, the identifiers agree everywhere, and tampering
//! is caught with a named error.

use der::Decode;
use piv::cbeff::{container_record, CbeffRecord};
use piv::chuid::Chuid;
use piv::security_object::{DataGroup, SecurityObjectContainer};
use piv::DataObject;
use pki::fips201::{
    chuid_signer_certificates, verify_biometric, verify_chuid, verify_security_object,
    BiometricError, CertCardIds, DataGroupStatus, SecurityObjectError, SignerDnCheck,
};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::ValidationOptions;
use pki_issue::{pem_encode, CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::path::Path;
use std::process::Command;

struct Card {
    pki: TestPki,
    card: CardCredentials,
    store: TrustStore,
    crls: RevocationSet,
}

fn issue(alg: KeyAlgorithm) -> Card {
    let pki = TestPki::generate(TestPkiOptions {
        algorithm: alg,
        ..Default::default()
    })
    .unwrap();
    let card = pki
        .issue_card(&CardOptions {
            algorithm: alg,
            ..Default::default()
        })
        .unwrap();
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    let mut c = RevocationSet::builder();
    for crl in pki.crls() {
        c.add_der(crl).unwrap();
    }
    Card {
        pki,
        card,
        store: b.build(),
        crls: c.build(),
    }
}

/// The containers the Security Object covers (all but the CCC), and the
/// Security Object itself.
fn objects(card: &CardCredentials) -> Vec<(DataObject, Vec<u8>)> {
    let c = card.containers.as_ref().unwrap();
    let mut v: Vec<(DataObject, Vec<u8>)> = c
        .objects()
        .iter()
        .filter(|(o, _)| *o != DataObject::Ccc)
        .map(|(o, b)| (*o, b.to_vec()))
        .collect();
    v.push((DataObject::Chuid, card.chuid.clone()));
    v
}

#[test]
fn the_security_object_verifies_and_catches_a_tampered_data_group() {
    let c = issue(KeyAlgorithm::P256);
    let containers = c.card.containers.as_ref().unwrap();
    let signer = chuid_signer_certificates(&c.card.chuid);
    assert_eq!(signer, vec![c.pki.content_signer_der().to_vec()]);
    let extra: Vec<&[u8]> = signer.iter().map(|v| v.as_slice()).collect();
    let objs = objects(&c.card);
    let given: Vec<(DataObject, &[u8])> = objs.iter().map(|(o, b)| (*o, b.as_slice())).collect();
    let opts = ValidationOptions::default();
    let v = verify_security_object(
        &c.store,
        &containers.security_object,
        &given,
        &extra,
        &c.crls,
        &opts,
    )
    .unwrap();
    assert_eq!(v.signer_dn, SignerDnCheck::Matches);
    assert_eq!(v.hash, "SHA-256");
    let mapped: Vec<(u8, &str)> = v
        .groups
        .iter()
        .map(|g| (g.number, g.container_id.as_str()))
        .collect();
    assert_eq!(mapped, [(1, "3000"), (2, "6010"), (3, "3001"), (4, "6030")]);
    assert!(v
        .groups
        .iter()
        .all(|g| g.status == DataGroupStatus::Matches));

    // The same containers as GET DATA returns them, inside 53.
    let wrapped: Vec<(DataObject, Vec<u8>)> =
        objs.iter().map(|(o, b)| (*o, o.as_read(b))).collect();
    let given_wrapped: Vec<(DataObject, &[u8])> =
        wrapped.iter().map(|(o, b)| (*o, b.as_slice())).collect();
    verify_security_object(
        &c.store,
        &containers.security_object,
        &given_wrapped,
        &extra,
        &c.crls,
        &opts,
    )
    .unwrap();
    // The hashes cover the containers' contents (the value of 53).
    let lds = {
        let so = SecurityObjectContainer::decode(&containers.security_object).unwrap();
        let sd = cms::content_info::ContentInfo::from_der(&so.signature)
            .unwrap()
            .content
            .decode_as::<cms::signed_data::SignedData>()
            .unwrap();
        let e = sd.encap_content_info.econtent.unwrap();
        let os = e.decode_as::<der::asn1::OctetString>().unwrap();
        pki::fips201::lds::LdsSecurityObject::from_der(os.as_bytes()).unwrap()
    };
    let printed_hash = &lds.data_group_hash_values[2];
    assert_eq!(printed_hash.data_group_number, 3);
    assert_eq!(
        printed_hash.data_group_hash_value.as_bytes(),
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &containers.printed_info).as_ref()
    );

    // Without the PIN-protected containers: reported as not read.
    let free: Vec<(DataObject, &[u8])> = given
        .iter()
        .filter(|(o, _)| o.read_access() == piv::Access::Always)
        .copied()
        .collect();
    let v = verify_security_object(
        &c.store,
        &containers.security_object,
        &free,
        &extra,
        &c.crls,
        &opts,
    )
    .unwrap();
    assert_eq!(
        v.groups
            .iter()
            .filter(|g| g.status == DataGroupStatus::NotRead)
            .count(),
        3
    );

    // One byte of the Printed Information changed.
    let mut printed = containers.printed_info.clone();
    printed[3] ^= 0x20;
    let tampered: Vec<(DataObject, &[u8])> = given
        .iter()
        .map(|&(o, b)| {
            if o == DataObject::PrintedInfo {
                (o, printed.as_slice())
            } else {
                (o, b)
            }
        })
        .collect();
    let e = verify_security_object(
        &c.store,
        &containers.security_object,
        &tampered,
        &extra,
        &c.crls,
        &opts,
    )
    .unwrap_err();
    assert_eq!(e.code(), "security-object-data-group-mismatch");
    assert_eq!(
        e,
        SecurityObjectError::DataGroupMismatch {
            number: 3,
            object: "Printed Information".into()
        }
    );

    // Without the signer certificate the signature cannot be checked.
    let e = verify_security_object(
        &c.store,
        &containers.security_object,
        &given,
        &[],
        &c.crls,
        &opts,
    )
    .unwrap_err();
    assert_eq!(e.code(), "security-object-signature-refused");

    // A signed LDS hash altered: the signature breaks.
    let mut so = SecurityObjectContainer::decode(&containers.security_object).unwrap();
    let n = so.signature.len();
    so.signature[n - 80] ^= 0x01;
    assert!(
        verify_security_object(&c.store, &so.encode(), &given, &extra, &c.crls, &opts).is_err()
    );
}

/// The Security Object with its (unsigned) mapping rewritten by `edit`.
fn remapped(security_object: &[u8], edit: impl FnOnce(&mut Vec<DataGroup>)) -> Vec<u8> {
    let mut so = SecurityObjectContainer::decode(security_object).unwrap();
    edit(&mut so.mapping);
    so.encode()
}

#[test]
fn the_unsigned_mapping_cannot_hide_a_tampered_container() {
    let c = issue(KeyAlgorithm::P256);
    let containers = c.card.containers.as_ref().unwrap();
    let signer = chuid_signer_certificates(&c.card.chuid);
    let extra: Vec<&[u8]> = signer.iter().map(|v| v.as_slice()).collect();
    let opts = ValidationOptions::default();
    let mut printed = containers.printed_info.clone();
    printed[3] ^= 0x20;
    let mut objs = objects(&c.card);
    for (o, b) in objs.iter_mut() {
        if *o == DataObject::PrintedInfo {
            *b = printed.clone();
        }
    }
    let given: Vec<(DataObject, &[u8])> = objs.iter().map(|(o, b)| (*o, b.as_slice())).collect();
    let verify = |so: &[u8], given: &[(DataObject, &[u8])]| {
        verify_security_object(&c.store, so, given, &extra, &c.crls, &opts)
    };

    // Data group 3 (Printed Information) pointed at the Iris container,
    // which was not read: the edited Printed Information is named by no
    // data group, and is refused rather than left unchecked.
    let to_iris = remapped(&containers.security_object, |m| {
        m.iter_mut().find(|g| g.number == 3).unwrap().object = DataObject::Iris
    });
    let e = verify(&to_iris, &given).unwrap_err();
    assert_eq!(e.code(), "security-object-container-not-mapped");
    assert_eq!(
        e,
        SecurityObjectError::NotMapped {
            container: "Printed Information".into()
        }
    );

    // Two data groups swapped, both containers given: each is compared with
    // the other's signed hash.
    let swapped = remapped(&containers.security_object, |m| {
        let (a, b) = (m[0].object, m[2].object);
        m[0].object = b;
        m[2].object = a;
    });
    let untouched = objects(&c.card);
    let original: Vec<(DataObject, &[u8])> =
        untouched.iter().map(|(o, b)| (*o, b.as_slice())).collect();
    assert_eq!(
        verify(&swapped, &original).unwrap_err().code(),
        "security-object-data-group-mismatch"
    );

    // A data group dropped from the mapping: its signed hash is unmapped.
    let dropped = remapped(&containers.security_object, |m| m.retain(|g| g.number != 3));
    assert_eq!(
        verify(&dropped, &original).unwrap_err(),
        SecurityObjectError::HashMissing { number: 3 }
    );
    // A data group added that the signature does not hash.
    let added = remapped(&containers.security_object, |m| {
        m.push(DataGroup {
            number: 9,
            object: DataObject::Iris,
        })
    });
    assert_eq!(
        verify(&added, &original).unwrap_err(),
        SecurityObjectError::HashMissing { number: 9 }
    );
    // The CCC is not covered: given, it is refused as not mapped.
    let mut with_ccc = original.clone();
    with_ccc.push((DataObject::Ccc, &containers.ccc));
    assert_eq!(
        verify(&containers.security_object, &with_ccc)
            .unwrap_err()
            .code(),
        "security-object-container-not-mapped"
    );
    // The untouched Security Object still verifies.
    verify(&containers.security_object, &original).unwrap();
}

#[test]
fn the_pivsigner_dn_is_compared_as_a_name_not_as_bytes() {
    use pki_issue::SignerDn;
    let c = issue(KeyAlgorithm::P256);
    let subject = x509_cert::Certificate::from_der(c.pki.content_signer_der())
        .unwrap()
        .tbs_certificate
        .subject;
    let org = subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find(|a| a.oid == const_oid::db::rfc4519::O)
        .map(|a| String::from_utf8(a.value.value().to_vec()).unwrap())
        .unwrap();
    let hex_printable = |s: &str| {
        let mut v = vec![0x13, s.len() as u8];
        v.extend_from_slice(s.as_bytes());
        hex::encode(v)
    };
    let sign = |dn: SignerDn| {
        let mut chuid = Chuid::decode(&c.card.chuid).unwrap();
        pki_issue::sign_chuid_as(
            &mut chuid,
            c.pki.content_signer_der(),
            c.pki.content_signer_key(),
            true,
            dn,
        )
        .unwrap();
        verify_chuid(
            &c.store,
            &chuid.encode(),
            &[],
            &c.crls,
            &ValidationOptions::default(),
        )
    };
    // The same name with its values as PrintableString rather than
    // UTF8String, or in other case: equal per RFC 5280 §7.1.
    for dn in [
        format!(
            "CN=#{},O=#{},C=US",
            hex_printable("Test CHUID Content Signer"),
            hex_printable(&org)
        ),
        format!("CN=TEST chuid CONTENT signer,O={},C=us", org.to_uppercase()),
    ] {
        let v = sign(SignerDn::Other(dn.clone())).unwrap_or_else(|e| panic!("{dn}: {e}"));
        assert_eq!(v.signer_dn, SignerDnCheck::Matches, "{dn}");
    }
    // Another name is still refused.
    let e = sign(SignerDn::Other(format!(
        "CN=Test CHUID Content Signer 2,O={org},C=US"
    )))
    .unwrap_err();
    assert_eq!(e.code(), "chuid-signer-dn-mismatch");
}

#[test]
fn both_biometrics_verify_and_carry_the_card_identifiers() {
    for alg in [
        KeyAlgorithm::P256,
        KeyAlgorithm::P384,
        KeyAlgorithm::Rsa2048,
    ] {
        let c = issue(alg);
        let containers = c.card.containers.as_ref().unwrap();
        let signer = chuid_signer_certificates(&c.card.chuid);
        let extra: Vec<&[u8]> = signer.iter().map(|v| v.as_slice()).collect();
        let chuid = Chuid::decode(&c.card.chuid).unwrap();
        let opts = ValidationOptions::default();
        for (container, format, kind) in [
            (&containers.fingerprints, 0x0201, 0x000008),
            (&containers.facial_image, 0x0501, 0x000002),
        ] {
            let v = verify_biometric(
                &c.store,
                container,
                Some((&chuid.fascn, &chuid.guid)),
                &extra,
                &c.crls,
                &opts,
            )
            .unwrap();
            assert_eq!(v.header.format_type, format);
            assert_eq!(v.header.biometric_type, kind);
            assert_eq!(v.header.creator, "pivgate test data");
            assert_eq!(v.header.fascn, chuid.fascn);
            assert_eq!(v.uuid, Some(chuid.guid));
            assert_eq!(v.signer_dn, SignerDnCheck::Matches);

            // The data block altered (BC, its 3-byte length, the 88-byte header).
            let mut bad = container.clone();
            assert_eq!(&bad[..2], &[0xBC, 0x82]);
            bad[4 + 88 + 30] ^= 0x01;
            let e = verify_biometric(&c.store, &bad, None, &extra, &c.crls, &opts).unwrap_err();
            assert!(
                matches!(&e, BiometricError::Signature(s) if s.code() == "cms-digest-mismatch"),
                "{e}"
            );
            // Another card's identifiers.
            let other = [0u8; 25];
            let e = verify_biometric(
                &c.store,
                container,
                Some((&other, &chuid.guid)),
                &extra,
                &c.crls,
                &opts,
            )
            .unwrap_err();
            assert_eq!(e.code(), "biometric-fascn-mismatch");
            let e = verify_biometric(
                &c.store,
                container,
                Some((&chuid.fascn, &[7u8; 16])),
                &extra,
                &c.crls,
                &opts,
            )
            .unwrap_err();
            assert_eq!(e.code(), "biometric-uuid-mismatch");
        }
    }
}

/// The biometric container re-signed by the test PKI's content signer
/// after `edit` changed its CBEFF header, without the entryUUID attribute
/// when `drop_uuid`: a record another issuer could have signed.
fn resigned_biometric(
    c: &Card,
    container: &[u8],
    edit: impl Fn(&mut piv::cbeff::CbeffHeader),
    drop_uuid: bool,
) -> Vec<u8> {
    use cms::content_info::ContentInfo;
    use cms::signed_data::SignedData;
    use der::{Any, Encode};
    let record = CbeffRecord::parse(container_record(container).unwrap()).unwrap();
    let ci = ContentInfo::from_der(&record.signature_block).unwrap();
    let sd: SignedData = ci.content.decode_as().unwrap();
    let key = c.pki.content_signer_key();
    let mut header = record.header.clone();
    edit(&mut header);
    let mut guess = record.signature_block.len();
    loop {
        header.sb_length = guess as u16;
        let mut signed = header.encode().to_vec();
        signed.extend_from_slice(&record.bdb);
        let digest = aws_lc_rs::digest::digest(key.digest_algorithm(), &signed);
        let mut sd = sd.clone();
        let mut si = sd.signer_infos.0.get(0).unwrap().clone();
        let mut attrs = der::asn1::SetOfVec::new();
        for a in si.signed_attrs.as_ref().unwrap().iter() {
            if drop_uuid && a.oid == pki::fips201::oids::ENTRY_UUID {
                continue;
            }
            let mut a = a.clone();
            if a.oid == const_oid::db::rfc5911::ID_MESSAGE_DIGEST {
                let v = Any::encode_from(&der::asn1::OctetString::new(digest.as_ref()).unwrap())
                    .unwrap();
                a.values = der::asn1::SetOfVec::try_from(vec![v]).unwrap();
            }
            attrs.insert(a).unwrap();
        }
        si.signature =
            der::asn1::OctetString::new(key.sign(&attrs.to_der().unwrap()).unwrap()).unwrap();
        si.signed_attrs = Some(attrs);
        sd.signer_infos =
            cms::signed_data::SignerInfos(der::asn1::SetOfVec::try_from(vec![si]).unwrap());
        let sb = ContentInfo {
            content_type: ci.content_type,
            content: Any::encode_from(&sd).unwrap(),
        }
        .to_der()
        .unwrap();
        if sb.len() == guess {
            signed.extend_from_slice(&sb);
            return piv::cbeff::encode_container(&signed);
        }
        guess = sb.len();
    }
}

#[test]
fn biometric_headers_are_held_to_sp800_76() {
    let c = issue(KeyAlgorithm::P256);
    let containers = c.card.containers.as_ref().unwrap();
    let signer = chuid_signer_certificates(&c.card.chuid);
    let extra: Vec<&[u8]> = signer.iter().map(|v| v.as_slice()).collect();
    let chuid = Chuid::decode(&c.card.chuid).unwrap();
    let card = Some((&chuid.fascn, &chuid.guid));
    let opts = ValidationOptions::default();
    let verify = |container: &[u8], card, opts: &ValidationOptions| {
        verify_biometric(&c.store, container, card, &extra, &c.crls, opts)
    };
    let fp = &containers.fingerprints;
    // Re-signed unchanged, the record verifies: what fails below is the
    // change alone.
    let same = resigned_biometric(&c, fp, |_| {}, false);
    verify(&same, card, &opts).unwrap();

    let v2 = resigned_biometric(&c, fp, |h| h.version = 0x02, false);
    assert_eq!(
        verify(&v2, card, &opts).unwrap_err(),
        BiometricError::HeaderVersion(0x02)
    );
    // Signed, but without the integrity bit, or with extra bits.
    for options in [0x01, 0x0F, 0x8D] {
        let so = resigned_biometric(&c, fp, |h| h.security_options = options, false);
        let e = verify(&so, card, &opts).unwrap_err();
        assert_eq!(e, BiometricError::SecurityOptions(options));
        assert_eq!(e.code(), "biometric-security-options");
    }

    // The validity period of the header against the validation time.
    let header = CbeffRecord::parse(container_record(fp).unwrap())
        .unwrap()
        .header;
    let at = |t: piv::cbeff::CbeffTime, plus: i64| ValidationOptions {
        time: pki::time::Time::from_parts(
            i64::from(t.year),
            u32::from(t.month),
            u32::from(t.day),
            u32::from(t.hour),
            u32::from(t.minute),
            u32::from(t.second),
        )
        .unwrap()
        .plus_secs(plus),
        ..opts.clone()
    };
    let e = verify(fp, card, &at(header.not_after, 1)).unwrap_err();
    assert_eq!(e.code(), "biometric-expired", "{e}");
    // At the last second the record itself is still valid (the CRLs of the
    // test PKI are stale by then, which is refused on its own ground).
    let e = verify(fp, card, &at(header.not_after, 0)).unwrap_err();
    assert_eq!(e.code(), "biometric-signature-refused", "{e}");
    let e = verify(fp, card, &at(header.not_before, -1)).unwrap_err();
    assert_eq!(e.code(), "biometric-not-yet-valid", "{e}");
    // Expired a year ago, signed by a signer still valid today.
    let expired = resigned_biometric(
        &c,
        fp,
        |h| {
            h.not_after.year = h.created.year - 1;
            h.not_before.year = h.created.year - 2;
        },
        false,
    );
    assert_eq!(
        verify(&expired, card, &opts).unwrap_err().code(),
        "biometric-expired"
    );

    // No entryUUID, on a card with a UUID: refused; on a card without one
    // (all-zero GUID), or with no card to compare with, accepted.
    let no_uuid = resigned_biometric(&c, fp, |_| {}, true);
    let e = verify(&no_uuid, card, &opts).unwrap_err();
    assert_eq!(e.code(), "biometric-uuid-missing");
    assert!(e.to_string().contains("entryUUID"), "{e}");
    let v = verify(&no_uuid, Some((&chuid.fascn, &[0u8; 16])), &opts).unwrap();
    assert_eq!(v.uuid, None);
    verify(&no_uuid, None, &opts).unwrap();
}

#[test]
fn one_fascn_and_uuid_everywhere() {
    let c = issue(KeyAlgorithm::P256);
    let chuid = verify_chuid(
        &c.store,
        &c.card.chuid,
        &[],
        &c.crls,
        &ValidationOptions::default(),
    )
    .unwrap()
    .chuid;
    assert_eq!(chuid.fascn, c.card.fascn.encode().unwrap());
    assert_eq!(chuid.guid, c.card.uuid);
    for slot in [0x9A, 0x9E] {
        let ids: CertCardIds =
            pki::fips201::card_identity(&c.card.slot(slot).unwrap().certificate).unwrap();
        assert_eq!(
            ids.fascn.as_ref().map(|f| f.encode().unwrap()),
            Some(chuid.fascn)
        );
        assert_eq!(ids.uuid, Some(chuid.guid));
    }
    let containers = c.card.containers.as_ref().unwrap();
    for container in [&containers.fingerprints, &containers.facial_image] {
        let r = CbeffRecord::parse(container_record(container).unwrap()).unwrap();
        assert_eq!(r.header.fascn, chuid.fascn);
    }
    let ccc = piv::ccc::Ccc::decode(&containers.ccc).unwrap();
    assert_eq!(&ccc.card_identifier[7..], &chuid.guid[..14]);
    let printed = piv::printed::PrintedInfo::decode(&containers.printed_info).unwrap();
    assert_eq!(printed.name, "Test Cardholder");
    assert_eq!(
        printed.expiration,
        piv::printed::printed_date(chuid.expiration)
    );
}

#[test]
fn credentials_save_and_load_with_their_containers() {
    let c = issue(KeyAlgorithm::P256);
    let dir = tempfile::tempdir().unwrap();
    c.card.save(dir.path()).unwrap();
    assert_eq!(CardCredentials::load(dir.path()).unwrap(), c.card);
    std::fs::remove_file(dir.path().join("security-object.bin")).unwrap();
    let e = CardCredentials::load(dir.path()).unwrap_err();
    assert!(e.to_string().contains("security-object.bin"), "{e}");
}

// ---- OpenSSL as an independent verifier ---------------------------------

fn openssl_available() -> bool {
    Command::new("openssl").arg("version").output().is_ok()
}

/// `openssl cms -verify` of a DER SignedData, with detached `content` when
/// given; the signer certificate is offered with -certfile.
fn openssl_cms_verify(dir: &Path, c: &Card, sig: &[u8], content: Option<&[u8]>) -> (bool, String) {
    let sig_path = dir.join("sig.der");
    std::fs::write(&sig_path, sig).unwrap();
    let cas = dir.join("cas.pem");
    std::fs::write(
        &cas,
        pem_encode("CERTIFICATE", c.pki.root_der())
            + &pem_encode("CERTIFICATE", c.pki.intermediate_der()),
    )
    .unwrap();
    let signer = dir.join("signer.pem");
    std::fs::write(
        &signer,
        pem_encode("CERTIFICATE", c.pki.content_signer_der()),
    )
    .unwrap();
    let mut cmd = Command::new("openssl");
    cmd.args(["cms", "-verify", "-binary", "-inform", "DER", "-in"])
        .arg(&sig_path)
        .arg("-CAfile")
        .arg(&cas)
        .arg("-certfile")
        .arg(&signer)
        .args(["-purpose", "any", "-out"])
        .arg(dir.join("out.bin"));
    if let Some(content) = content {
        let p = dir.join("content.bin");
        std::fs::write(&p, content).unwrap();
        cmd.arg("-content").arg(p);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn openssl_verifies_every_signed_object_of_an_issued_card() {
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = issue(KeyAlgorithm::P256);
    let containers = c.card.containers.as_ref().unwrap();

    // The CHUID, its content rebuilt here from the bytes as stored: the
    // TLVs up to the signature (3E), then the error detection code FE 00
    // (SP 800-73-4 Part 1 §3.1.2.1).
    let chuid = Chuid::decode(&c.card.chuid).unwrap();
    let content = {
        let raw = c.card.chuid.as_slice();
        // One BER-TLV with a one-byte tag: (tag, header length, value length).
        let tlv_at = |i: usize| -> (u8, usize, usize) {
            match raw[i + 1] {
                n if n < 0x80 => (raw[i], 2, usize::from(n)),
                0x81 => (raw[i], 3, usize::from(raw[i + 2])),
                0x82 => (
                    raw[i],
                    4,
                    usize::from(raw[i + 2]) << 8 | usize::from(raw[i + 3]),
                ),
                l => panic!("length byte {l:#04X}"),
            }
        };
        assert_ne!(raw[0], 0x53, "the CHUID is stored without its container");
        let mut i = 0;
        loop {
            let (tag, hdr, len) = tlv_at(i);
            if tag == 0x3E {
                break;
            }
            i += hdr + len;
        }
        let (_, hdr, len) = tlv_at(i);
        assert_eq!(&raw[i + hdr + len..], [0xFE, 0x00], "FE 00 follows 3E");
        let mut v = raw[..i].to_vec();
        v.extend_from_slice(&[0xFE, 0x00]);
        v
    };
    assert_eq!(
        content,
        piv::chuid::digest_content_of(&c.card.chuid).unwrap()
    );
    let (ok, err) = openssl_cms_verify(
        dir.path(),
        &c,
        chuid.signature.as_ref().unwrap(),
        Some(&content),
    );
    assert!(ok, "CHUID: {err}");

    // The Security Object encapsulates its LDSSecurityObject.
    let so = SecurityObjectContainer::decode(&containers.security_object).unwrap();
    let (ok, err) = openssl_cms_verify(dir.path(), &c, &so.signature, None);
    assert!(ok, "Security Object: {err}");
    let lds = std::fs::read(dir.path().join("out.bin")).unwrap();
    let parsed = pki::fips201::lds::LdsSecurityObject::from_der(&lds).unwrap();
    assert_eq!(parsed.data_group_hash_values.len(), 4);

    // Both biometric signature blocks, over the CBEFF header and data block.
    for (name, container) in [
        ("fingerprints", &containers.fingerprints),
        ("facial image", &containers.facial_image),
    ] {
        let r = CbeffRecord::parse(container_record(container).unwrap()).unwrap();
        let (ok, err) =
            openssl_cms_verify(dir.path(), &c, &r.signature_block, Some(&r.signed_bytes));
        assert!(ok, "{name}: {err}");
        let mut bad = r.signed_bytes.clone();
        bad[100] ^= 1;
        let (ok, _) = openssl_cms_verify(dir.path(), &c, &r.signature_block, Some(&bad));
        assert!(!ok, "{name}: a tampered data block verified");
    }
}
