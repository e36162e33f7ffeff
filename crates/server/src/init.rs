//! `pivgate init [DIR]`: a working site in one command — a commented
//! `pivgate.toml` and a test PKI beside it.

use std::path::{Path, PathBuf};

use pki_issue::{TestPki, TestPkiOptions};

use crate::config::{init_template, Config, ConfigError, CONFIG_FILE};

/// The reader name the seed binds to the front door: the virtual reader of
/// pcscd + vpcd that `pivgate card serve` answers behind.
pub const DEFAULT_READER: &str = "Virtual PCD 00 00";

/// Why `init` did not write anything (or stopped half-way).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("{0} already exists; choose another directory or remove it")]
    Exists(PathBuf),
    #[error("cannot write {path}: {error}", path = path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("test PKI: {0}")]
    Pki(pki_issue::IssueError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl From<pki_issue::IssueError> for InitError {
    fn from(e: pki_issue::IssueError) -> Self {
        InitError::Pki(e)
    }
}

/// What `init` wrote.
#[derive(Debug)]
pub struct Initialised {
    pub config: PathBuf,
    pub pki_dir: PathBuf,
    pub data_dir: PathBuf,
}

impl Initialised {
    /// What was written and what to run next, for people.
    pub fn next_steps(&self) -> String {
        let config = self.config.display();
        format!(
            "wrote {config}\n\
             wrote a test PKI in {}\n\
             data will be kept in {}\n\
             \n\
             next:\n  \
             pivgate serve --config {config}\n  \
             pivgate token create --role admin --config {config}\n  \
             then open the dashboard at http://127.0.0.1:8080/ and sign in with that token\n",
            self.pki_dir.display(),
            self.data_dir.display(),
        )
    }
}

/// Writes `DIR/pivgate.toml` and a test PKI in `DIR/pki/`. Refuses to
/// overwrite an existing configuration or PKI.
pub fn init(dir: &Path, time_zone: &str) -> Result<Initialised, InitError> {
    let config = dir.join(CONFIG_FILE);
    let pki_dir = dir.join("pki");
    if config.exists() {
        return Err(InitError::Exists(config));
    }
    if pki_dir.exists() {
        return Err(InitError::Exists(pki_dir));
    }
    access::time_zone(time_zone).map_err(|problem| ConfigError::Invalid {
        path: config.clone(),
        key: "seed.site.time_zone".into(),
        problem,
    })?;
    std::fs::create_dir_all(dir).map_err(|error| InitError::Io {
        path: dir.to_owned(),
        error,
    })?;
    TestPki::init(&pki_dir, TestPkiOptions::default())?;
    // 0600: a configuration grows secrets (a database password).
    files::write_atomic(&config, init_template(DEFAULT_READER, time_zone).as_bytes()).map_err(
        |error| InitError::Io {
            path: config.clone(),
            error,
        },
    )?;
    let c = Config::load(&config)?;
    Ok(Initialised {
        config,
        pki_dir,
        data_dir: c.data_dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_steps_name_the_files_and_the_commands_to_run() {
        let done = Initialised {
            config: "s/pivgate.toml".into(),
            pki_dir: "s/pki".into(),
            data_dir: "s/data".into(),
        };
        assert_eq!(
            done.next_steps(),
            "wrote s/pivgate.toml\nwrote a test PKI in s/pki\ndata will be kept in s/data\n\n\
             next:\n  pivgate serve --config s/pivgate.toml\n  \
             pivgate token create --role admin --config s/pivgate.toml\n  \
             then open the dashboard at http://127.0.0.1:8080/ and sign in with that token\n"
        );
    }

    #[test]
    fn init_writes_a_site_whose_trust_loads() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        let done = init(&site, "Europe/Berlin").unwrap();
        let c = Config::load(&done.config).unwrap();
        let trust = c.trust.as_ref().unwrap().load().unwrap();
        assert_eq!(trust.store.anchor_count(), 1);
        assert_eq!(trust.crls.len(), 2);
        assert_eq!(c.data_dir, site.join("pivgate-data"));
        assert!(TestPki::load(&done.pki_dir).is_ok());
        // A second init does not overwrite.
        assert!(matches!(init(&site, "UTC"), Err(InitError::Exists(_))));
        let e = init(&dir.path().join("other"), "Nowhere/Land").unwrap_err();
        assert!(e.to_string().contains("seed.site.time_zone"), "{e}");
    }
}
