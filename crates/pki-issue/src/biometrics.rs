//! Synthetic biometric records for test cards, in the SP 800-76-2 form: a
//! CBEFF patron header (Table 7), a biometric data block and a CBEFF
//! signature block signed by the content signer (§9.2.2).
//!
//! The data blocks are generated, not captured, and say so: the fingerprint
//! record is an INCITS 378-2004 finger minutiae record of two finger views
//! (right and left index, SP 800-76-2 §4.4) with random minutiae; the facial
//! record is an INCITS 385-2004 / ISO 19794-5 record holding a flat grey
//! baseline JPEG whose comment marks it as a synthetic test image. The CBEFF
//! creator field is "pivgate test data".

use super::cms_sign::{attribute, sign, SignRequest, SignerDn};
use super::keys::KeyPair;
use super::IssueError;
use der::asn1::OctetString;
use der::Any;
use piv::cbeff::{self, CbeffHeader, CbeffTime};
use pki::fips201::oids;

/// The CBEFF creator of every record made here.
pub const CREATOR: &str = "pivgate test data";

/// The comment inside the synthetic facial image.
pub const FACE_COMMENT: &str = "pivgate synthetic test image - not a person";

fn random_bytes(n: usize) -> Result<Vec<u8>, IssueError> {
    let mut b = vec![0u8; n];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| IssueError::Crypto)?;
    Ok(b)
}

/// An INCITS 378-2004 finger minutiae record with two finger views (right
/// index finger, position 2, and left index finger, position 7), each with
/// 24 random minutiae on a 500 ppi, 400 x 500 pixel image.
pub fn synthetic_minutiae_record() -> Result<Vec<u8>, IssueError> {
    const WIDTH: u16 = 400;
    const HEIGHT: u16 = 500;
    const MINUTIAE: usize = 24;
    let mut views = Vec::new();
    for position in [2u8, 7] {
        let r = random_bytes(MINUTIAE * 6)?;
        views.push(position);
        views.push(0x00); // view 0, impression type 0 (live-scan plain)
        views.push(80); // finger quality
        views.push(MINUTIAE as u8);
        for m in r.chunks_exact(6) {
            let kind: u16 = if m[0] & 1 == 0 { 1 } else { 2 }; // ridge ending / bifurcation
            let x = 40 + u16::from_be_bytes([m[1], m[2]]) % (WIDTH - 80);
            let y = 40 + u16::from_be_bytes([m[3], m[4]]) % (HEIGHT - 80);
            views.extend_from_slice(&((kind << 14) | x).to_be_bytes());
            views.extend_from_slice(&y.to_be_bytes());
            views.push(m[5] % 180); // angle in 2-degree units
            views.push(60 + m[0] % 41); // minutia quality
        }
        views.extend_from_slice(&[0, 0]); // no extended data
    }
    let len = 26 + views.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(b"FMR\0");
    out.extend_from_slice(b" 20\0");
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]); // CBEFF product identifier: none
    out.extend_from_slice(&[0, 0]); // capture equipment: not certified, id 0
    out.extend_from_slice(&WIDTH.to_be_bytes());
    out.extend_from_slice(&HEIGHT.to_be_bytes());
    out.extend_from_slice(&197u16.to_be_bytes()); // 500 ppi in pixels per cm
    out.extend_from_slice(&197u16.to_be_bytes());
    out.push(2); // finger views
    out.push(0); // reserved
    out.extend_from_slice(&views);
    Ok(out)
}

/// A baseline JPEG (JFIF) of `width` x `height` pixels (multiples of 8), all
/// mid grey, with `comment` in a COM segment. Every 8x8 block has a zero DC
/// difference and no AC coefficients, so one-symbol Huffman tables code each
/// block in two bits.
pub fn grey_jpeg(width: u16, height: u16, comment: &str) -> Vec<u8> {
    let mut j = Vec::with_capacity(256);
    let segment = |j: &mut Vec<u8>, marker: u8, body: &[u8]| {
        j.extend_from_slice(&[0xFF, marker]);
        j.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
        j.extend_from_slice(body);
    };
    j.extend_from_slice(&[0xFF, 0xD8]);
    segment(
        &mut j,
        0xE0,
        &[b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0],
    );
    segment(&mut j, 0xFE, comment.as_bytes());
    let mut dqt = vec![0u8];
    dqt.extend_from_slice(&[1u8; 64]);
    segment(&mut j, 0xDB, &dqt);
    let [hh, hl] = height.to_be_bytes();
    let [wh, wl] = width.to_be_bytes();
    segment(&mut j, 0xC0, &[8, hh, hl, wh, wl, 1, 1, 0x11, 0]);
    for class in [0x00u8, 0x10] {
        let mut dht = vec![class, 1];
        dht.extend_from_slice(&[0u8; 15]);
        dht.push(0x00);
        segment(&mut j, 0xC4, &dht);
    }
    segment(&mut j, 0xDA, &[1, 1, 0x00, 0, 63, 0]);
    let blocks = (usize::from(width) / 8) * (usize::from(height) / 8);
    let bits = blocks * 2;
    let mut data = vec![0u8; bits.div_ceil(8)];
    if !bits.is_multiple_of(8) {
        // Pad the last byte with 1 bits.
        let last = data.len() - 1;
        data[last] = 0xFF >> (bits % 8);
    }
    for b in data {
        j.push(b);
        if b == 0xFF {
            j.push(0x00);
        }
    }
    j.extend_from_slice(&[0xFF, 0xD9]);
    j
}

/// An INCITS 385-2004 / ISO 19794-5 facial image record with one full
/// frontal, 8-bit grey JPEG image of 240 x 320 pixels.
pub fn synthetic_face_record() -> Vec<u8> {
    const WIDTH: u16 = 240;
    const HEIGHT: u16 = 320;
    let image = grey_jpeg(WIDTH, HEIGHT, FACE_COMMENT);
    let block_len = 20 + 12 + image.len();
    let record_len = 14 + block_len;
    let mut out = Vec::with_capacity(record_len);
    out.extend_from_slice(b"FAC\0");
    out.extend_from_slice(b"010\0");
    out.extend_from_slice(&(record_len as u32).to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes()); // one facial image
                                                // Facial information block.
    out.extend_from_slice(&(block_len as u32).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // feature points
    out.extend_from_slice(&[0, 0, 0]); // gender, eye colour, hair colour: unspecified
    out.extend_from_slice(&[0, 0, 0]); // property mask
    out.extend_from_slice(&1u16.to_be_bytes()); // expression: neutral
    out.extend_from_slice(&[0, 0, 0]); // pose angles: unspecified
    out.extend_from_slice(&[0, 0, 0]); // pose angle uncertainty
                                       // Image information.
    out.push(1); // full frontal
    out.push(0); // JPEG
    out.extend_from_slice(&WIDTH.to_be_bytes());
    out.extend_from_slice(&HEIGHT.to_be_bytes());
    out.push(3); // 8-bit greyscale
    out.push(0); // source type: unspecified
    out.extend_from_slice(&0u16.to_be_bytes()); // device type
    out.extend_from_slice(&0u16.to_be_bytes()); // quality: unspecified
    out.extend_from_slice(&image);
    out
}

/// A CBEFF time from seconds since the epoch.
pub fn cbeff_time(secs: i64) -> CbeffTime {
    let (y, m, d) = pki::time::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    CbeffTime {
        year: y as u16,
        month: m as u8,
        day: d as u8,
        hour: (s / 3600) as u8,
        minute: (s / 60 % 60) as u8,
        second: (s % 60) as u8,
    }
}

/// What a CBEFF record is about.
pub struct BiometricSpec<'a> {
    pub format_type: u16,
    pub biometric_type: u32,
    pub data_type: u8,
    pub quality: i8,
    pub bdb: &'a [u8],
    /// The card's FASC-N (header field and pivFASC-N attribute).
    pub fascn: &'a [u8; 25],
    /// The card UUID (entryUUID attribute).
    pub uuid: &'a [u8; 16],
    /// Creation time and validity, seconds since the epoch.
    pub created: i64,
    pub not_after: i64,
}

/// A signed CBEFF record: the header, the data block and a signature block
/// whose message digest covers the header and data block (SP 800-76-2
/// §9.2.2). The signature block is a CMS SignedData with the content
/// detached, eContentType id-PIV-biometricObject, no certificates (the
/// content signer is the CHUID's, which carries its certificate) and the
/// signed attributes contentType, messageDigest, signingTime, pivSigner-DN,
/// pivFASC-N and entryUUID.
pub fn signed_cbeff_record(
    spec: &BiometricSpec<'_>,
    signer_cert_der: &[u8],
    signer_key: &KeyPair,
) -> Result<Vec<u8>, IssueError> {
    let mut header = CbeffHeader {
        version: cbeff::PATRON_HEADER_VERSION,
        security_options: cbeff::SECURITY_OPTIONS_SIGNED,
        bdb_length: u32::try_from(spec.bdb.len())
            .map_err(|_| IssueError::Invalid("biometric data block too long".into()))?,
        sb_length: 0,
        format_owner: cbeff::FORMAT_OWNER_M1,
        format_type: spec.format_type,
        created: cbeff_time(spec.created),
        not_before: cbeff_time(spec.created),
        not_after: cbeff_time(spec.not_after),
        biometric_type: spec.biometric_type,
        data_type: spec.data_type,
        quality: spec.quality,
        creator: CREATOR.into(),
        fascn: *spec.fascn,
    };
    let signing_time = super::der_time(spec.created)?;
    // The header holds the signature block's length and is itself signed;
    // an ECDSA signature's length varies by a byte or two, so sign until the
    // length announced is the length produced.
    let mut guess = 0usize;
    for _ in 0..64 {
        header.sb_length = u16::try_from(guess)
            .map_err(|_| IssueError::Invalid("signature block too long".into()))?;
        let mut record = header.encode().to_vec();
        record.extend_from_slice(spec.bdb);
        let sb = sign(
            SignRequest {
                econtent_type: oids::PIV_BIOMETRIC_OBJECT,
                content: &record,
                embed_content: false,
                include_certificate: false,
                extra_attributes: vec![
                    attribute(
                        const_oid::db::rfc5911::ID_SIGNING_TIME,
                        Any::encode_from(&signing_time)?,
                    )?,
                    attribute(
                        oids::PIV_FASCN_ATTRIBUTE,
                        Any::encode_from(&OctetString::new(spec.fascn.as_slice())?)?,
                    )?,
                    attribute(
                        oids::ENTRY_UUID,
                        Any::encode_from(&OctetString::new(spec.uuid.as_slice())?)?,
                    )?,
                ],
                signer_dn: SignerDn::Subject,
            },
            signer_cert_der,
            signer_key,
        )?;
        if sb.len() == guess {
            record.extend_from_slice(&sb);
            return Ok(record);
        }
        guess = sb.len();
    }
    Err(IssueError::Invalid(
        "could not make a signature block of a stable length".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutiae_record_has_two_views_and_its_length() {
        let r = synthetic_minutiae_record().unwrap();
        assert_eq!(&r[..8], b"FMR\0 20\0");
        assert_eq!(usize::from(u16::from_be_bytes([r[8], r[9]])), r.len());
        assert_eq!(r[24], 2);
        assert_eq!(r.len(), 26 + 2 * (4 + 24 * 6 + 2));
        assert_eq!(r[26], 2, "first view: right index");
        assert_ne!(
            r,
            synthetic_minutiae_record().unwrap(),
            "minutiae are random"
        );
    }

    #[test]
    fn face_record_wraps_a_marked_jpeg() {
        let r = synthetic_face_record();
        assert_eq!(&r[..4], b"FAC\0");
        assert_eq!(&r[4..8], b"010\0");
        assert_eq!(
            u32::from_be_bytes([r[8], r[9], r[10], r[11]]) as usize,
            r.len()
        );
        let jpeg = &r[14 + 20 + 12..];
        assert_eq!(&jpeg[..2], &[0xFF, 0xD8]);
        assert_eq!(&jpeg[jpeg.len() - 2..], &[0xFF, 0xD9]);
        assert!(jpeg
            .windows(FACE_COMMENT.len())
            .any(|w| w == FACE_COMMENT.as_bytes()));
    }

    #[test]
    fn cbeff_times_are_utc_calendar_fields() {
        let t = cbeff_time(951_868_800 + 3_723);
        assert_eq!(t.to_string(), "2000-03-01T01:02:03Z");
    }
}
