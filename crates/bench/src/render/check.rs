//! A small well-formedness check for the report's HTML and SVG, used by
//! the renderer's tests and the report's integration test (no XML parser in
//! the dependency tree).

/// HTML elements without an end tag.
pub const HTML_VOID: &[&str] = &["meta", "br", "hr", "img", "link"];

/// A small well-formedness check: tags balance and nest, attributes are
/// quoted, every `&` starts a known entity, no stray `<` or `>`. HTML void
/// elements (`void`) need no end tag.
pub fn well_formed(doc: &str, void: &[&str]) -> Result<(), String> {
    let mut stack: Vec<String> = Vec::new();
    let b = doc.as_bytes();
    let mut i = 0;
    let entity = |at: usize| -> Result<usize, String> {
        let rest = &doc[at..];
        let end = rest
            .find(';')
            .filter(|e| *e <= 10)
            .ok_or(format!("bare & at {at}"))?;
        let name = &rest[1..end];
        let ok = matches!(name, "amp" | "lt" | "gt" | "quot" | "apos")
            || name
                .strip_prefix('#')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if ok {
            Ok(end + 1)
        } else {
            Err(format!("unknown entity &{name}; at {at}"))
        }
    };
    while i < b.len() {
        match b[i] {
            b'<' => {
                let rest = &doc[i..];
                if let Some(r) = rest.strip_prefix("<!--") {
                    i += 4 + r.find("-->").ok_or("unclosed comment")? + 3;
                    continue;
                }
                if rest.starts_with("<?") || rest.starts_with("<!DOCTYPE") {
                    i += rest.find('>').ok_or("unclosed declaration")? + 1;
                    continue;
                }
                // Find the tag's end, skipping quoted attribute values.
                let mut j = i + 1;
                let mut quote = None;
                while j < b.len() {
                    match (quote, b[j]) {
                        (None, b'"' | b'\'') => quote = Some(b[j]),
                        (Some(q), c) if c == q => quote = None,
                        (Some(_), b'<') => return Err(format!("< in an attribute at {j}")),
                        (Some(_), b'&') => {
                            j += entity(j)?;
                            continue;
                        }
                        (None, b'>') => break,
                        (None, b'<') => return Err(format!("< inside a tag at {j}")),
                        _ => {}
                    }
                    j += 1;
                }
                if j >= b.len() {
                    return Err(format!("unclosed tag at {i}"));
                }
                let tag = &doc[i + 1..j];
                if let Some(name) = tag.strip_prefix('/') {
                    let name = name.trim();
                    match stack.pop() {
                        Some(open) if open == name => {}
                        other => return Err(format!("</{name}> closes {other:?} at {i}")),
                    }
                } else {
                    let self_closing = tag.ends_with('/');
                    let name: String = tag
                        .trim_end_matches('/')
                        .split(|c: char| c.is_whitespace())
                        .next()
                        .unwrap_or("")
                        .to_string();
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':')
                    {
                        return Err(format!("bad tag name {name:?} at {i}"));
                    }
                    // Attributes: name="value" pairs.
                    let attrs = tag.trim_end_matches('/')[name.len()..].trim();
                    let mut a = attrs;
                    while !a.is_empty() {
                        let eq = a
                            .find('=')
                            .ok_or(format!("attribute without value in <{name}"))?;
                        let q = a[eq + 1..]
                            .chars()
                            .next()
                            .ok_or("attribute value missing")?;
                        if q != '"' && q != '\'' {
                            return Err(format!("unquoted attribute in <{name}"));
                        }
                        let close = a[eq + 2..].find(q).ok_or("unclosed attribute")?;
                        a = a[eq + 2 + close + 1..].trim_start();
                    }
                    if !self_closing && !void.contains(&name.as_str()) {
                        stack.push(name);
                    }
                }
                i = j + 1;
            }
            b'>' => return Err(format!("stray > at {i}")),
            b'&' => i += entity(i)?,
            _ => i += 1,
        }
    }
    match stack.last() {
        None => Ok(()),
        Some(open) => Err(format!("<{open}> never closed")),
    }
}
