//! PIV data objects (SP 800-73-4 Part 1 Table 3) with their BER-TLV tags
//! and read access rules.

/// Who may read a data object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Free read.
    Always,
    /// After PIN verification.
    Pin,
    /// After PIN verification or on-card comparison (this card: PIN).
    PinOrOcc,
}

/// A PIV data object container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataObject {
    /// `5FC107` Card Capability Container.
    Ccc,
    /// `5FC102` Card Holder Unique Identifier.
    Chuid,
    /// `5FC105` X.509 certificate for PIV authentication (9A).
    CertPivAuth,
    /// `5FC103` cardholder fingerprints.
    Fingerprints,
    /// `5FC106` security object.
    SecurityObject,
    /// `5FC108` cardholder facial image.
    FacialImage,
    /// `5FC101` X.509 certificate for card authentication (9E).
    CertCardAuth,
    /// `5FC10A` X.509 certificate for digital signature (9C).
    CertSignature,
    /// `5FC10B` X.509 certificate for key management (9D).
    CertKeyManagement,
    /// `5FC109` printed information.
    PrintedInfo,
    /// `7E` discovery object.
    Discovery,
    /// `5FC10C` key history object.
    KeyHistory,
    /// `5FC10D`..`5FC120` retired X.509 certificates for key management 1-20.
    RetiredCert(u8),
    /// `5FC121` cardholder iris images.
    Iris,
    /// `7F61` biometric information templates group template.
    Bitgt,
    /// `5FC122` secure messaging certificate signer.
    SmCertSigner,
    /// `5FC123` pairing code reference data container.
    PairingCode,
    /// `5FFF01` attestation certificate (Yubico).
    AttestationCert,
    /// Other vendor objects in `5FFFxx` (Yubico admin data `5FFF00`, ...).
    Vendor(u8),
}

/// The tag of the template a PIV data object is read and written in.
pub const CONTAINER_TAG: u32 = 0x53;

/// The contents of a data object given with or without the TLV it is read in
/// (`wrapper`: `53`, or see [`DataObject::wrapper_tag`]): the value of that
/// TLV when `data` starts with its tag (it must then be exactly that one
/// TLV), `data` itself otherwise.
pub fn container_content(data: &[u8], wrapper: u32) -> Result<&[u8], iso7816::tlv::TlvError> {
    let mut tag = Vec::with_capacity(3);
    iso7816::tlv::push_tag(&mut tag, wrapper);
    if data.starts_with(&tag) {
        iso7816::tlv::parse_single(data, wrapper)
    } else {
        Ok(data)
    }
}

impl DataObject {
    pub fn from_tag(tag: u32) -> Option<Self> {
        Some(match tag {
            0x5FC107 => DataObject::Ccc,
            0x5FC102 => DataObject::Chuid,
            0x5FC105 => DataObject::CertPivAuth,
            0x5FC103 => DataObject::Fingerprints,
            0x5FC106 => DataObject::SecurityObject,
            0x5FC108 => DataObject::FacialImage,
            0x5FC101 => DataObject::CertCardAuth,
            0x5FC10A => DataObject::CertSignature,
            0x5FC10B => DataObject::CertKeyManagement,
            0x5FC109 => DataObject::PrintedInfo,
            0x7E => DataObject::Discovery,
            0x5FC10C => DataObject::KeyHistory,
            0x5FC10D..=0x5FC120 => DataObject::RetiredCert((tag - 0x5FC10C) as u8),
            0x5FC121 => DataObject::Iris,
            0x7F61 => DataObject::Bitgt,
            0x5FC122 => DataObject::SmCertSigner,
            0x5FC123 => DataObject::PairingCode,
            0x5FFF01 => DataObject::AttestationCert,
            0x5FFF00..=0x5FFFFF => DataObject::Vendor(tag as u8),
            _ => return None,
        })
    }

    pub fn tag(self) -> u32 {
        match self {
            DataObject::Ccc => 0x5FC107,
            DataObject::Chuid => 0x5FC102,
            DataObject::CertPivAuth => 0x5FC105,
            DataObject::Fingerprints => 0x5FC103,
            DataObject::SecurityObject => 0x5FC106,
            DataObject::FacialImage => 0x5FC108,
            DataObject::CertCardAuth => 0x5FC101,
            DataObject::CertSignature => 0x5FC10A,
            DataObject::CertKeyManagement => 0x5FC10B,
            DataObject::PrintedInfo => 0x5FC109,
            DataObject::Discovery => 0x7E,
            DataObject::KeyHistory => 0x5FC10C,
            DataObject::RetiredCert(n) => 0x5FC10C + u32::from(n),
            DataObject::Iris => 0x5FC121,
            DataObject::Bitgt => 0x7F61,
            DataObject::SmCertSigner => 0x5FC122,
            DataObject::PairingCode => 0x5FC123,
            DataObject::AttestationCert => 0x5FFF01,
            DataObject::Vendor(b) => 0x5FFF00 | u32::from(b),
        }
    }

    /// Encoded tag bytes as sent in the `5C` tag list of GET/PUT DATA.
    pub fn tag_bytes(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(3);
        iso7816::tlv::push_tag(&mut out, self.tag());
        out
    }

    /// Parses the value of a `5C` tag list (1 to 3 bytes).
    pub fn from_tag_bytes(bytes: &[u8]) -> Option<Self> {
        match bytes {
            [a] => Self::from_tag(u32::from(*a)),
            [a, b] => Self::from_tag(u32::from_be_bytes([0, 0, *a, *b])),
            [a, b, c] => Self::from_tag(u32::from_be_bytes([0, *a, *b, *c])),
            _ => None,
        }
    }

    /// The 2-byte ContainerID of SP 800-73-4 Part 1 Table 2 (what the
    /// Security Object's mapping of data groups names), for the SP 800-73-4
    /// containers; `None` for vendor objects.
    pub fn container_id(self) -> Option<u16> {
        Some(match self {
            DataObject::Ccc => 0xDB00,
            DataObject::Chuid => 0x3000,
            DataObject::CertPivAuth => 0x0101,
            DataObject::Fingerprints => 0x6010,
            DataObject::SecurityObject => 0x9000,
            DataObject::FacialImage => 0x6030,
            DataObject::CertCardAuth => 0x0500,
            DataObject::CertSignature => 0x0100,
            DataObject::CertKeyManagement => 0x0102,
            DataObject::PrintedInfo => 0x3001,
            DataObject::Discovery => 0x6050,
            DataObject::KeyHistory => 0x6060,
            DataObject::RetiredCert(n) => 0x1000 + u16::from(n),
            DataObject::Iris => 0x1015,
            DataObject::Bitgt => 0x1016,
            DataObject::SmCertSigner => 0x1017,
            DataObject::PairingCode => 0x1018,
            DataObject::AttestationCert | DataObject::Vendor(_) => return None,
        })
    }

    /// The container whose ContainerID is `id` (see [`DataObject::container_id`]).
    pub fn from_container_id(id: u16) -> Option<Self> {
        let o = match id {
            0xDB00 => DataObject::Ccc,
            0x3000 => DataObject::Chuid,
            0x0101 => DataObject::CertPivAuth,
            0x6010 => DataObject::Fingerprints,
            0x9000 => DataObject::SecurityObject,
            0x6030 => DataObject::FacialImage,
            0x0500 => DataObject::CertCardAuth,
            0x0100 => DataObject::CertSignature,
            0x0102 => DataObject::CertKeyManagement,
            0x3001 => DataObject::PrintedInfo,
            0x6050 => DataObject::Discovery,
            0x6060 => DataObject::KeyHistory,
            0x1001..=0x1014 => DataObject::RetiredCert((id - 0x1000) as u8),
            0x1015 => DataObject::Iris,
            0x1016 => DataObject::Bitgt,
            0x1017 => DataObject::SmCertSigner,
            0x1018 => DataObject::PairingCode,
            _ => return None,
        };
        Some(o)
    }

    /// Read access rule of the standard.
    pub fn read_access(self) -> Access {
        match self {
            DataObject::Fingerprints
            | DataObject::FacialImage
            | DataObject::PrintedInfo
            | DataObject::Iris => Access::Pin,
            DataObject::PairingCode => Access::PinOrOcc,
            _ => Access::Always,
        }
    }

    /// Whether GET DATA answers the object under its own tag rather than
    /// wrapped in `53` (the discovery object and the BIT group template).
    pub fn is_self_tagged(self) -> bool {
        matches!(self, DataObject::Discovery | DataObject::Bitgt)
    }

    /// The tag of the TLV GET DATA returns the object in: `53`, or the
    /// object's own tag for the discovery object and the BIT group template.
    pub fn wrapper_tag(self) -> u32 {
        if self.is_self_tagged() {
            self.tag()
        } else {
            CONTAINER_TAG
        }
    }

    /// The object as GET DATA returns it, from its content.
    pub fn as_read(self, content: &[u8]) -> Vec<u8> {
        iso7816::tlv::encode(self.wrapper_tag(), content)
    }

    /// Whether the object is a certificate container.
    pub fn is_certificate(self) -> bool {
        matches!(
            self,
            DataObject::CertPivAuth
                | DataObject::CertSignature
                | DataObject::CertKeyManagement
                | DataObject::CertCardAuth
                | DataObject::RetiredCert(_)
                | DataObject::AttestationCert
                | DataObject::SmCertSigner
        )
    }

    /// A human-readable name.
    pub fn name(self) -> String {
        match self {
            DataObject::Ccc => "Card Capability Container".into(),
            DataObject::Chuid => "CHUID".into(),
            DataObject::CertPivAuth => "X.509 Certificate for PIV Authentication".into(),
            DataObject::Fingerprints => "Cardholder Fingerprints".into(),
            DataObject::SecurityObject => "Security Object".into(),
            DataObject::FacialImage => "Cardholder Facial Image".into(),
            DataObject::CertCardAuth => "X.509 Certificate for Card Authentication".into(),
            DataObject::CertSignature => "X.509 Certificate for Digital Signature".into(),
            DataObject::CertKeyManagement => "X.509 Certificate for Key Management".into(),
            DataObject::PrintedInfo => "Printed Information".into(),
            DataObject::Discovery => "Discovery Object".into(),
            DataObject::KeyHistory => "Key History Object".into(),
            DataObject::RetiredCert(n) => {
                format!("Retired X.509 Certificate for Key Management {n}")
            }
            DataObject::Iris => "Cardholder Iris Images".into(),
            DataObject::Bitgt => "Biometric Information Templates Group Template".into(),
            DataObject::SmCertSigner => "Secure Messaging Certificate Signer".into(),
            DataObject::PairingCode => "Pairing Code Reference Data Container".into(),
            DataObject::AttestationCert => "Attestation Certificate".into(),
            DataObject::Vendor(b) => format!("Vendor object 5FFF{b:02X}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_wrapped_as_get_data_returns_them_and_unwrapped() {
        assert_eq!(DataObject::Chuid.as_read(&[1, 2]), [0x53, 2, 1, 2]);
        assert_eq!(DataObject::Discovery.as_read(&[9]), [0x7E, 1, 9]);
        let big = vec![0u8; 300];
        assert_eq!(
            DataObject::FacialImage.as_read(&big)[..4],
            [0x53, 0x82, 1, 44]
        );
        assert_eq!(DataObject::Ccc.as_read(&[0; 200])[..3], [0x53, 0x81, 200]);
        for o in [DataObject::Chuid, DataObject::Discovery, DataObject::Bitgt] {
            let read = o.as_read(&big);
            assert_eq!(container_content(&read, o.wrapper_tag()).unwrap(), big);
        }
        assert_eq!(
            container_content(&[0x30, 1, 2], 0x53).unwrap(),
            [0x30, 1, 2]
        );
        assert!(container_content(&[0x53, 1, 2, 3], 0x53).is_err());
        assert!(container_content(&[0x53, 5, 2], 0x53).is_err());
    }

    #[test]
    fn tags_round_trip_over_the_whole_space() {
        let mut count = 0;
        for tag in (0x5FC100..=0x5FC1FF)
            .chain(0x5FFF00..=0x5FFFFF)
            .chain([0x7E, 0x7F61])
        {
            if let Some(o) = DataObject::from_tag(tag) {
                assert_eq!(o.tag(), tag);
                assert_eq!(DataObject::from_tag_bytes(&o.tag_bytes()), Some(o));
                count += 1;
            }
        }
        // The 36 SP 800-73-4 containers + 256 vendor tags.
        assert_eq!(count, 36 + 256);
        assert_eq!(
            DataObject::from_tag_bytes(&[0x7E]),
            Some(DataObject::Discovery)
        );
        assert_eq!(
            DataObject::from_tag_bytes(&[0x5F, 0xC1, 0x0D]),
            Some(DataObject::RetiredCert(1))
        );
        assert_eq!(DataObject::from_tag_bytes(&[]), None);
        assert_eq!(DataObject::from_tag_bytes(&[1, 2, 3, 4]), None);
    }

    #[test]
    fn container_ids_round_trip() {
        let mut n = 0;
        for tag in (0x5FC100..=0x5FC1FF).chain([0x7E, 0x7F61]) {
            if let Some(o) = DataObject::from_tag(tag) {
                let id = o.container_id().unwrap();
                assert_eq!(DataObject::from_container_id(id), Some(o));
                n += 1;
            }
        }
        assert_eq!(n, 36);
        assert_eq!(DataObject::Chuid.container_id(), Some(0x3000));
        assert_eq!(DataObject::RetiredCert(20).container_id(), Some(0x1014));
        assert_eq!(DataObject::Vendor(0).container_id(), None);
        assert_eq!(DataObject::from_container_id(0x1234), None);
    }

    #[test]
    fn access_rules_follow_the_standard() {
        assert_eq!(DataObject::PrintedInfo.read_access(), Access::Pin);
        assert_eq!(DataObject::FacialImage.read_access(), Access::Pin);
        assert_eq!(DataObject::Fingerprints.read_access(), Access::Pin);
        assert_eq!(DataObject::Iris.read_access(), Access::Pin);
        for free in [
            DataObject::Chuid,
            DataObject::Ccc,
            DataObject::CertCardAuth,
            DataObject::Discovery,
            DataObject::KeyHistory,
            DataObject::SecurityObject,
        ] {
            assert_eq!(free.read_access(), Access::Always);
        }
    }
}
