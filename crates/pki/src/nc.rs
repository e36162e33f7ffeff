//! Name constraints, RFC 5280 §4.2.1.10 and §6.1.3 (b)-(c).
//!
//! Each CA's nameConstraints extension is checked on its own against every later certificate's
//! names, which is equivalent to intersecting permitted subtrees and uniting excluded ones.
//! Forms compared: directoryName (RDN prefix), dNSName (label suffix), rfc822Name (mailbox,
//! host or `.domain`, including emailAddress attributes of the subject DN), URI (host part),
//! iPAddress (address and mask). A constraint on any other form makes a certificate that uses
//! that form invalid, since it cannot be checked; so does a name of a constrained form that is
//! not well formed (a URI without a host, an e-mail address without exactly one `@`, a DNS
//! name that is not a host name): it is refused, never compared.

use crate::cert::{name_syntax, Cert, GeneralName, NameConstraints};
use crate::name::{email_addresses, NormName};

/// Most name-to-subtree comparisons one certificate may require; beyond this the certificate is
/// refused rather than checked (crafted certificates could otherwise demand billions).
pub const MAX_COMPARISONS: usize = crate::budget::LIMITS.name_comparisons;

/// A name of a certificate that a constraint refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub name: String,
    pub excluded: bool,
}

/// Names in a certificate subject to name constraints (subject DN and subjectAltName).
pub fn names_of(cert: &Cert) -> Vec<GeneralName> {
    let mut out = Vec::new();
    if !cert.subject.is_empty() {
        out.push(GeneralName::Directory(cert.subject.clone()));
    }
    if let Ok(emails) = email_addresses(cert.subject_rdns()) {
        out.extend(emails.into_iter().map(GeneralName::Rfc822));
    }
    if let Some(san) = &cert.ext.subject_alt_names {
        out.extend(san.iter().cloned());
    }
    out
}

fn describe(n: &GeneralName, subject_display: &str) -> String {
    match n {
        GeneralName::Rfc822(s) => format!("email {s}"),
        GeneralName::Dns(s) => format!("DNS name {s}"),
        GeneralName::Uri(s) => format!("URI {s}"),
        GeneralName::Ip(b) => format!("IP address {}", ip_text(b)),
        GeneralName::Directory(_) => format!("directory name {subject_display}"),
        GeneralName::OtherName { .. } => "a name of form [0]".to_string(),
        GeneralName::Other(t) => format!("a name of form [{t}]"),
    }
}

fn ip_text(b: &[u8]) -> String {
    match b.len() {
        4 => std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string(),
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            std::net::Ipv6Addr::from(a).to_string()
        }
        _ => hex::encode(b),
    }
}

fn same_form(a: &GeneralName, b: &GeneralName) -> bool {
    match (a, b) {
        (GeneralName::Other(x), GeneralName::Other(y)) => x == y,
        _ => std::mem::discriminant(a) == std::mem::discriminant(b),
    }
}

/// Checks `names` (of a certificate whose subject prints as `display`) against one CA's
/// constraints (RFC 5280 §6.1.3 (b) and (c)).
pub fn check(names: &[GeneralName], nc: &NameConstraints, display: &str) -> Result<(), Violation> {
    for name in names {
        if let GeneralName::Other(_) | GeneralName::OtherName { .. } = name {
            // A form this crate cannot compare: any constraint on it refuses the certificate
            // (RFC 5280 §4.2.1.10: process the constraint or reject).
            let constrained = |list: &Option<Vec<GeneralName>>| {
                list.as_ref()
                    .is_some_and(|l| l.iter().any(|c| same_form(c, name)))
            };
            if constrained(&nc.permitted) || constrained(&nc.excluded) {
                return Err(Violation {
                    name: describe(name, display),
                    excluded: constrained(&nc.excluded),
                });
            }
            continue;
        }
        if let Some(problem) = malformed(name) {
            let constrained = |list: &Option<Vec<GeneralName>>| {
                list.as_ref()
                    .is_some_and(|l| l.iter().any(|c| same_form(c, name)))
            };
            // RFC 5280 §4.2.1.10 applies URI constraints to the host: a URI
            // without one (the card UUID's urn:uuid of FIPS 201) cannot lie
            // inside an excluded subtree, but cannot be shown to lie inside
            // a permitted one either.
            let hostless_uri = matches!(name, GeneralName::Uri(_));
            if constrained(&nc.permitted) || (!hostless_uri && constrained(&nc.excluded)) {
                return Err(Violation {
                    name: format!("{}, which {problem},", describe(name, display)),
                    excluded: !constrained(&nc.permitted),
                });
            }
            continue;
        }
        if let Some(permitted) = &nc.permitted {
            let mut of_form = permitted.iter().filter(|p| same_form(p, name)).peekable();
            if of_form.peek().is_some() && !of_form.any(|p| matches(name, p)) {
                return Err(Violation {
                    name: describe(name, display),
                    excluded: false,
                });
            }
        }
        if let Some(excluded) = &nc.excluded {
            if excluded
                .iter()
                .any(|e| same_form(e, name) && matches(name, e))
            {
                return Err(Violation {
                    name: describe(name, display),
                    excluded: true,
                });
            }
        }
    }
    Ok(())
}

/// What makes `name` impossible to compare with a constraint of its form, if anything.
fn malformed(name: &GeneralName) -> Option<&'static str> {
    match name {
        GeneralName::Uri(u) => uri_host(u).is_none().then_some("has no host"),
        GeneralName::Rfc822(m) => name_syntax::mailbox_problem(m),
        GeneralName::Dns(d) => name_syntax::dns_problem(d),
        _ => None,
    }
}

/// Whether `name` lies within the subtree `base` (same form assumed).
pub fn matches(name: &GeneralName, base: &GeneralName) -> bool {
    match (name, base) {
        (GeneralName::Directory(n), GeneralName::Directory(b)) => directory_within(n, b),
        (GeneralName::Dns(n), GeneralName::Dns(b)) => dns_within(n, b),
        (GeneralName::Rfc822(n), GeneralName::Rfc822(b)) => email_within(n, b),
        (GeneralName::Uri(n), GeneralName::Uri(b)) => uri_within(n, b),
        (GeneralName::Ip(n), GeneralName::Ip(b)) => ip_within(n, b),
        // Other forms are never compared (see `check`).
        _ => false,
    }
}

/// directoryName: the base is an RDN-wise prefix of the name.
pub fn directory_within(name: &NormName, base: &NormName) -> bool {
    name.is_within(base)
}

/// dNSName: the name equals the base or ends with `.base` (label boundary); a base starting
/// with `.` matches only proper subdomains; an empty base matches everything.
pub fn dns_within(name: &str, base: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let base = base.trim_end_matches('.').to_ascii_lowercase();
    if base.is_empty() {
        return true;
    }
    if let Some(stripped) = base.strip_prefix('.') {
        return name.len() > stripped.len() && name.ends_with(&base);
    }
    name == base
        || (name.len() > base.len()
            && name.ends_with(&base)
            && name.as_bytes()[name.len() - base.len() - 1] == b'.')
}

/// rfc822Name: a base with `@` is one mailbox; a base starting with `.` is any host in that
/// domain; otherwise the base is exactly the host part.
pub fn email_within(name: &str, base: &str) -> bool {
    let Some((local, host)) = name.rsplit_once('@') else {
        return false;
    };
    if let Some((blocal, bhost)) = base.rsplit_once('@') {
        return local == blocal && host.eq_ignore_ascii_case(bhost);
    }
    host_within(host, base)
}

/// A host against a constraint host: a base starting with `.` matches
/// subdomains only, otherwise the host itself (case-insensitively).
fn host_within(host: &str, base: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let base = base.to_ascii_lowercase();
    if base.starts_with('.') {
        host.ends_with(&base)
    } else {
        host == base
    }
}

/// URI: compares the host part; a base starting with `.` matches subdomains only.
pub fn uri_within(name: &str, base: &str) -> bool {
    let Some(host) = uri_host(name) else {
        return false;
    };
    host_within(host, base)
}

fn uri_host(uri: &str) -> Option<&str> {
    let (_, rest) = uri.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        hostport.split(':').next()?
    };
    (!host.is_empty()).then_some(host)
}

/// iPAddress: the base is address followed by mask (8 or 32 bytes); the name is 4 or 16 bytes.
pub fn ip_within(name: &[u8], base: &[u8]) -> bool {
    if base.len() != name.len() * 2 {
        return false;
    }
    let (addr, mask) = base.split_at(name.len());
    name.iter()
        .zip(addr)
        .zip(mask)
        .all(|((n, a), m)| n & m == a & m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label_boundaries() {
        assert!(dns_within("example.com", "example.com"));
        assert!(dns_within("www.Example.com", "example.COM"));
        assert!(!dns_within("badexample.com", "example.com"));
        assert!(!dns_within("example.com", ".example.com"));
        assert!(dns_within("a.example.com", ".example.com"));
        assert!(dns_within("anything", ""));
    }

    #[test]
    fn email_forms() {
        assert!(email_within("user@example.com", "example.com"));
        assert!(!email_within("user@mail.example.com", "example.com"));
        assert!(email_within("user@mail.example.com", ".example.com"));
        assert!(email_within("user@example.com", "user@EXAMPLE.com"));
        assert!(!email_within("other@example.com", "user@example.com"));
        assert!(!email_within("not-an-address", "example.com"));
    }

    #[test]
    fn uri_hosts() {
        assert!(uri_within(
            "http://host.example.com:8080/path",
            ".example.com"
        ));
        assert!(uri_within(
            "ldap://user@host.example.com/",
            "host.example.com"
        ));
        assert!(!uri_within("http://example.com/", ".example.com"));
        assert!(!uri_within("urn:isbn:123", "example.com"));
        assert!(uri_within("http://[::1]/", "::1"));
    }

    #[test]
    fn ip_masks() {
        assert!(ip_within(
            &[192, 168, 1, 7],
            &[192, 168, 0, 0, 255, 255, 0, 0]
        ));
        assert!(!ip_within(
            &[192, 169, 1, 7],
            &[192, 168, 0, 0, 255, 255, 0, 0]
        ));
        assert!(!ip_within(&[192, 168, 1, 7], &[0u8; 32]));
    }

    #[test]
    fn permitted_and_excluded() {
        let nc = NameConstraints {
            permitted: Some(vec![GeneralName::Dns("example.com".into())]),
            excluded: Some(vec![GeneralName::Dns("bad.example.com".into())]),
        };
        assert!(check(&[GeneralName::Dns("ok.example.com".into())], &nc, "x").is_ok());
        assert!(check(&[GeneralName::Dns("other.org".into())], &nc, "x").is_err());
        let v = check(&[GeneralName::Dns("x.bad.example.com".into())], &nc, "x").unwrap_err();
        assert!(v.excluded);
        // Forms without constraints are unaffected.
        assert!(check(&[GeneralName::Rfc822("a@other.org".into())], &nc, "x").is_ok());
        assert!(check(&[GeneralName::Other(0)], &nc, "x").is_ok());
        // A constraint on a form that cannot be compared refuses names of that form.
        let other = NameConstraints {
            permitted: None,
            excluded: Some(vec![GeneralName::Other(0)]),
        };
        assert!(
            check(&[GeneralName::Other(0)], &other, "x")
                .unwrap_err()
                .excluded
        );
        assert!(check(&[GeneralName::Other(8)], &other, "x").is_ok());
    }

    #[test]
    fn a_piv_card_uuid_san_passes_an_excluded_uri_subtree() {
        // FIPS 201 puts the card UUID in the subjectAltName as a urn:uuid URI.
        let names = [
            GeneralName::Uri("urn:uuid:a4d5b1c2-0f3e-4e5a-9b8c-7d6e5f4a3b2c".into()),
            GeneralName::Rfc822("someone@agency.example".into()),
        ];
        let nc = NameConstraints {
            permitted: None,
            excluded: Some(vec![
                GeneralName::Uri("example.org".into()),
                GeneralName::Uri(".example.org".into()),
            ]),
        };
        assert!(check(&names, &nc, "CN=Cardholder").is_ok());
        // Alongside a permitted subtree of another form it is not inspected.
        let nc = NameConstraints {
            permitted: Some(vec![GeneralName::Rfc822("agency.example".into())]),
            excluded: Some(vec![GeneralName::Uri(".example.org".into())]),
        };
        assert!(check(&names, &nc, "CN=Cardholder").is_ok());
    }

    #[test]
    fn malformed_names_of_a_constrained_form_are_refused_not_compared() {
        let excluded_only = |n: GeneralName| NameConstraints {
            permitted: None,
            excluded: Some(vec![n]),
        };
        // Without a host, a URI cannot lie inside an excluded URI subtree
        // (RFC 5280 applies URI constraints to the host), but cannot be shown
        // to lie inside a permitted one.
        let nc = excluded_only(GeneralName::Uri(".example.com".into()));
        assert!(check(&[GeneralName::Uri("urn:uuid:1234".into())], &nc, "x").is_ok());
        assert!(check(&[GeneralName::Uri("https://other.org/".into())], &nc, "x").is_ok());
        assert!(check(
            &[GeneralName::Uri("https://a.example.com/".into())],
            &nc,
            "x"
        )
        .is_err());
        let nc = NameConstraints {
            permitted: Some(vec![GeneralName::Uri(".example.com".into())]),
            excluded: None,
        };
        let v = check(&[GeneralName::Uri("urn:uuid:1234".into())], &nc, "x").unwrap_err();
        assert!(v.name.contains("has no host"), "{v:?}");
        assert!(!v.excluded);
        // Two `@`: which part is the host?
        let nc = excluded_only(GeneralName::Rfc822("bad.example".into()));
        let v = check(
            &[GeneralName::Rfc822("a@good.example@bad.example".into())],
            &nc,
            "x",
        )
        .unwrap_err();
        assert!(v.name.contains("more than one @"), "{v:?}");
        // A leading dot under a permitted subtree.
        let nc = NameConstraints {
            permitted: Some(vec![GeneralName::Dns("example.com".into())]),
            excluded: None,
        };
        let v = check(&[GeneralName::Dns(".example.com".into())], &nc, "x").unwrap_err();
        assert!(v.name.contains("starts with a dot") && !v.excluded, "{v:?}");
        // Forms without constraints are not inspected.
        let uri_only = excluded_only(GeneralName::Uri("example.com".into()));
        assert!(check(&[GeneralName::Rfc822("no-at-sign".into())], &uri_only, "x").is_ok());
    }
}
