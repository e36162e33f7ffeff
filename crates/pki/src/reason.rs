//! The reason a certificate was revoked (RFC 5280 §5.3.1), as a CRL entry and an OCSP
//! answer both give it; below [`crate::crl`], [`crate::ocsp`] and [`crate::error`], which all
//! name it.

/// CRL reason codes (RFC 5280 §5.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Unspecified,
    KeyCompromise,
    CaCompromise,
    AffiliationChanged,
    Superseded,
    CessationOfOperation,
    CertificateHold,
    RemoveFromCrl,
    PrivilegeWithdrawn,
    AaCompromise,
    Other(u8),
}

impl Reason {
    pub(crate) fn from_code(c: u8) -> Reason {
        match c {
            0 => Reason::Unspecified,
            1 => Reason::KeyCompromise,
            2 => Reason::CaCompromise,
            3 => Reason::AffiliationChanged,
            4 => Reason::Superseded,
            5 => Reason::CessationOfOperation,
            6 => Reason::CertificateHold,
            8 => Reason::RemoveFromCrl,
            9 => Reason::PrivilegeWithdrawn,
            10 => Reason::AaCompromise,
            other => Reason::Other(other),
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            Reason::Unspecified => "unspecified",
            Reason::KeyCompromise => "key compromise",
            Reason::CaCompromise => "CA compromise",
            Reason::AffiliationChanged => "affiliation changed",
            Reason::Superseded => "superseded",
            Reason::CessationOfOperation => "cessation of operation",
            Reason::CertificateHold => "certificate hold",
            Reason::RemoveFromCrl => "remove from CRL",
            Reason::PrivilegeWithdrawn => "privilege withdrawn",
            Reason::AaCompromise => "AA compromise",
            Reason::Other(c) => return write!(f, "reason code {c}"),
        };
        f.write_str(s)
    }
}
