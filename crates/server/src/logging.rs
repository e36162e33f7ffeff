//! Where the log lines go and how they look: human-readable text (the
//! default) or JSON, one object a line (`--log-format json`), for journald
//! and log shippers. The level filter comes from `PIVGATE_LOG` (`warn`
//! when unset). A tap's line carries its event id (`event`).

use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The look of the log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    /// `2026-01-01T00:00:00Z  INFO server::source: tap door=1 …`
    #[default]
    #[cfg_attr(feature = "clap", value(help = None))]
    Text,
    /// `{"timestamp":…,"level":"INFO","fields":{"message":"tap","event":42,…},"target":…}`
    #[cfg_attr(feature = "clap", value(help = None))]
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("a logger is set up already")]
    AlreadySet,
}

/// The filter `PIVGATE_LOG` names, `warn` when unset or unreadable.
fn filter() -> EnvFilter {
    EnvFilter::try_from_env("PIVGATE_LOG").unwrap_or_else(|_| EnvFilter::new("warn"))
}

/// Sends the log lines to standard error in `format`; colours only on a
/// terminal (not in the journal or a file).
pub fn init(format: LogFormat) -> Result<(), LoggingError> {
    use std::io::IsTerminal;
    setup(format, std::io::stderr, std::io::stderr().is_terminal())
}

/// Sends the log lines to `writer` in `format`, without colours (tests
/// capture them).
pub fn init_with<W>(format: LogFormat, writer: W) -> Result<(), LoggingError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    setup(format, writer, false)
}

fn setup<W>(format: LogFormat, writer: W, ansi: bool) -> Result<(), LoggingError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_ansi(ansi)
        .with_writer(writer);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(false)
            .with_current_span(false)
            .try_init(),
    };
    result.map_err(|_| LoggingError::AlreadySet)
}

/// A writer that keeps everything written to it, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// What was written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
