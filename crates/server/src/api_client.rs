//! A client of the service's HTTP API for the command line (`pivgate
//! lockdown`): a bearer token, `http://` or `https://` (the service's
//! `[http] tls_cert`, checked against the system's roots or a given PEM
//! file), and errors that say what to do.
//!
//! Owns: the calls and what their answers mean. Must not: print.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

/// How long one call may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call failed. [`ClientError::code`] is stable.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("`{0}` is not an http:// or https:// URL of the service (e.g. http://127.0.0.1:8080)")]
    BadUrl(String),
    #[error("no API token: give --token-file or set PIVGATE_TOKEN (create one with `pivgate token create --role admin`)")]
    NoToken,
    #[error("reading the token from {path}: {reason}")]
    TokenFile { path: PathBuf, reason: String },
    #[error("cannot reach the service at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("the service does not know this token (401: {message}); it may have expired or been deleted")]
    Unauthorized { message: String },
    #[error(
        "this token may not do that (403: {message}); locking a site down needs an admin token"
    )]
    Forbidden { message: String },
    #[error("no site named `{name}`; the service's sites: {known}")]
    NoSuchSite { name: String, known: String },
    #[error("{what}: the service answered {status} ({message})")]
    Refused {
        what: String,
        status: u16,
        message: String,
    },
    #[error("{what}: the answer is not the service's JSON ({reason})")]
    BadAnswer { what: String, reason: String },
}

impl ClientError {
    /// A stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::BadUrl(_) => "bad-url",
            ClientError::NoToken => "no-token",
            ClientError::TokenFile { .. } => "token-file",
            ClientError::Unreachable { .. } => "unreachable",
            ClientError::Unauthorized { .. } => "unauthorized",
            ClientError::Forbidden { .. } => "forbidden",
            ClientError::NoSuchSite { .. } => "no-such-site",
            ClientError::Refused { .. } => "refused",
            ClientError::BadAnswer { .. } => "bad-answer",
        }
    }
}

/// Reads a token: the first line of `file` when given, else `env`
/// (PIVGATE_TOKEN).
pub fn token_from(
    file: Option<&std::path::Path>,
    env: Option<String>,
) -> Result<String, ClientError> {
    let Some(path) = file else {
        return env
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .ok_or(ClientError::NoToken);
    };
    let err = |reason: String| ClientError::TokenFile {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let t = text.lines().next().unwrap_or_default().trim();
    if t.is_empty() {
        return Err(err("the file is empty".into()));
    }
    Ok(t.to_string())
}

/// The service's API at `base` with one token.
pub struct ApiClient {
    base: String,
    token: String,
    agent: ureq::Agent,
}

/// A site and whether it is locked down, with its doors and the mode each
/// is driven in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteLockdown {
    pub site: i64,
    pub name: String,
    pub lockdown: bool,
    /// The admin event of the change (`on` / `off`), when there was one.
    pub event: Option<i64>,
    /// Each door of the site: name and driven mode (`locked` throughout a
    /// lockdown).
    pub doors: Vec<(String, String)>,
}

impl ApiClient {
    /// `base`: the service's URL (`http://host:port`, with or without
    /// `/api/v1`); `roots`: the PEM roots of an `https://` service's
    /// certificate (default: the system's).
    pub fn new(
        base: &str,
        token: String,
        roots: Option<PathBuf>,
    ) -> Result<ApiClient, ClientError> {
        let trimmed = base.trim_end_matches('/');
        let trimmed = trimmed.strip_suffix("/api/v1").unwrap_or(trimmed);
        let https = trimmed.starts_with("https://");
        if !(https || trimmed.starts_with("http://")) || trimmed.len() <= "https://".len() {
            return Err(ClientError::BadUrl(base.to_string()));
        }
        let mut agent = ureq::AgentBuilder::new().timeout(TIMEOUT);
        if https {
            agent = agent.tls_connector(pki::https::connector(roots));
        }
        Ok(ApiClient {
            base: trimmed.to_string(),
            token,
            agent: agent.build(),
        })
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.base);
        let r = self
            .agent
            .request(method, &url)
            .set("Authorization", &format!("Bearer {}", self.token));
        let res = match body {
            Some(b) => r
                .set("Content-Type", "application/json")
                .send_string(&b.to_string()),
            None => r.call(),
        };
        let bad = |reason: String| ClientError::BadAnswer {
            what: what.to_string(),
            reason,
        };
        match res {
            Ok(r) => {
                let text = r.into_string().map_err(|e| bad(e.to_string()))?;
                serde_json::from_str(&text).map_err(|e| bad(e.to_string()))
            }
            Err(ureq::Error::Status(status, r)) => {
                let text = r.into_string().unwrap_or_default();
                let message = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v["error"].as_str().map(str::to_string))
                    .unwrap_or_else(|| text.chars().take(200).collect());
                Err(match status {
                    401 => ClientError::Unauthorized { message },
                    403 => ClientError::Forbidden { message },
                    _ => ClientError::Refused {
                        what: what.to_string(),
                        status,
                        message,
                    },
                })
            }
            Err(e) => Err(ClientError::Unreachable {
                url: self.base.clone(),
                reason: e.to_string(),
            }),
        }
    }

    /// The site named `name`: its id and whether it is locked down.
    fn site(&self, name: &str) -> Result<(i64, bool), ClientError> {
        let list = self.call("GET", "/api/v1/sites", None, "listing the sites")?;
        let items = list["items"]
            .as_array()
            .ok_or_else(|| ClientError::BadAnswer {
                what: "listing the sites".into(),
                reason: "no `items`".into(),
            })?;
        items
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| Some((s["id"].as_i64()?, s["lockdown"].as_bool().unwrap_or(false))))
            .ok_or_else(|| ClientError::NoSuchSite {
                name: name.to_string(),
                known: {
                    let names: Vec<String> = items
                        .iter()
                        .filter_map(|s| s["name"].as_str().map(|n| format!("`{n}`")))
                        .collect();
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                },
            })
    }

    /// The doors of site `site` and the mode each is driven in.
    fn doors(&self, site: i64) -> Result<Vec<(String, String)>, ClientError> {
        let list = self.call("GET", "/api/v1/doors/status", None, "reading the doors")?;
        Ok(list["items"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter(|d| d["site"].as_i64() == Some(site))
                    .map(|d| {
                        (
                            d["name"].as_str().unwrap_or_default().to_string(),
                            d["driven_mode"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Whether the site named `name` is locked down, and its doors.
    pub fn lockdown_status(&self, name: &str) -> Result<SiteLockdown, ClientError> {
        let (site, lockdown) = self.site(name)?;
        Ok(SiteLockdown {
            site,
            name: name.to_string(),
            lockdown,
            event: None,
            doors: self.doors(site)?,
        })
    }

    /// Locks the site named `name` down (`on`) or lifts its lockdown, with
    /// `reason` for the log; the change is an admin event naming the token.
    pub fn set_lockdown(
        &self,
        name: &str,
        on: bool,
        reason: Option<&str>,
    ) -> Result<SiteLockdown, ClientError> {
        let (site, _) = self.site(name)?;
        let body = reason.map(|r| json!({ "reason": r }));
        let what = if on {
            format!("locking site `{name}` down")
        } else {
            format!("lifting the lockdown of site `{name}`")
        };
        let answer = self.call(
            if on { "POST" } else { "DELETE" },
            &format!("/api/v1/sites/{site}/lockdown"),
            body,
            &what,
        )?;
        Ok(SiteLockdown {
            site,
            name: name.to_string(),
            lockdown: answer["lockdown"].as_bool().unwrap_or(on),
            event: answer["event"].as_i64(),
            doors: self.doors(site)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_the_api_suffix_is_optional() {
        for bad in ["127.0.0.1:8080", "ftp://x", "http://", ""] {
            let e = ApiClient::new(bad, "t".into(), None).err().unwrap();
            assert_eq!(e.code(), "bad-url", "{bad}");
        }
        let c = ApiClient::new("http://127.0.0.1:8080/api/v1/", "t".into(), None).unwrap();
        assert_eq!(c.base, "http://127.0.0.1:8080");
    }

    #[test]
    fn the_token_comes_from_the_file_when_given_else_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "pvg_file\n").unwrap();
        assert_eq!(
            token_from(Some(&f), Some("pvg_env".into())).unwrap(),
            "pvg_file"
        );
        assert_eq!(
            token_from(None, Some(" pvg_env\n".into())).unwrap(),
            "pvg_env"
        );
        assert_eq!(
            token_from(None, Some(" ".into())).unwrap_err().code(),
            "no-token"
        );
        assert_eq!(token_from(None, None).unwrap_err().code(), "no-token");
        std::fs::write(&f, "\n").unwrap();
        assert_eq!(token_from(Some(&f), None).unwrap_err().code(), "token-file");
        let gone = dir.path().join("missing");
        assert_eq!(
            token_from(Some(&gone), None).unwrap_err().code(),
            "token-file"
        );
    }
}
