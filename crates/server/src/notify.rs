//! The systemd service notification protocol (`sd_notify(3)`), by hand:
//! one datagram of `KEY=VALUE` lines to the unix socket named by
//! `NOTIFY_SOCKET` (a path, or `@name` for an abstract socket). The
//! service tells systemd `READY=1` once it serves, `STATUS=` lines as it
//! goes, `WATCHDOG=1` while its tap path is healthy ([`crate::watchdog`])
//! and `STOPPING=1` when it shuts down.
//!
//! Outside systemd (`NOTIFY_SOCKET` unset) there is no [`Notifier`] and
//! nothing is sent.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Why a notification could not be sent, or the environment is unusable.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET `{0}` is neither an absolute path nor an abstract name (`@…`)")]
    BadAddress(String),
    #[error("NOTIFY_SOCKET `{socket}`: {error}")]
    Io {
        socket: String,
        error: std::io::Error,
    },
    #[error("WATCHDOG_USEC `{0}` is not a positive number of microseconds")]
    BadWatchdog(String),
}

impl NotifyError {
    /// A stable code for logs and counters.
    pub fn code(&self) -> &'static str {
        match self {
            NotifyError::BadAddress(_) => "notify.address",
            NotifyError::Io { .. } => "notify.io",
            NotifyError::BadWatchdog(_) => "notify.watchdog",
        }
    }
}

/// One state change told to the service manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Start-up is finished: the service serves.
    Ready,
    /// Reloading the access data (SIGHUP); `Ready` follows.
    Reloading,
    /// Shutting down.
    Stopping,
    /// A one-line description of what the service is doing.
    Status(String),
    /// The service is alive and its tap path is healthy.
    Watchdog,
}

impl State {
    fn line(&self) -> String {
        match self {
            State::Ready => "READY=1".into(),
            State::Reloading => "RELOADING=1".into(),
            State::Stopping => "STOPPING=1".into(),
            // One line: a newline would start another assignment.
            State::Status(s) => format!("STATUS={}", s.replace(['\n', '\r'], " ")),
            State::Watchdog => "WATCHDOG=1".into(),
        }
    }
}

/// The message for `states`, one assignment a line.
pub fn message(states: &[State]) -> String {
    let mut text = String::new();
    for s in states {
        text.push_str(&s.line());
        text.push('\n');
    }
    text
}

/// A connection to the service manager's notification socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
    name: String,
}

impl Notifier {
    /// The notifier `NOTIFY_SOCKET` names, or `None` when it is unset or
    /// empty (not started by systemd with `Type=notify`).
    pub fn from_env() -> Result<Option<Notifier>, NotifyError> {
        match std::env::var("NOTIFY_SOCKET") {
            Ok(s) if !s.is_empty() => Notifier::connect(&s).map(Some),
            _ => Ok(None),
        }
    }

    /// A notifier sending to `socket`: an absolute path, or `@name` for a
    /// socket in the abstract namespace.
    pub fn connect(socket: &str) -> Result<Notifier, NotifyError> {
        let io = |error| NotifyError::Io {
            socket: socket.to_string(),
            error,
        };
        let addr = if let Some(name) = socket.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes()).map_err(io)?
        } else if socket.starts_with('/') {
            SocketAddr::from_pathname(socket).map_err(io)?
        } else {
            return Err(NotifyError::BadAddress(socket.to_string()));
        };
        let sock = UnixDatagram::unbound().map_err(io)?;
        Ok(Notifier {
            socket: sock,
            addr,
            name: socket.to_string(),
        })
    }

    /// Sends `states` in one datagram.
    pub fn notify(&self, states: &[State]) -> Result<(), NotifyError> {
        self.socket
            .send_to_addr(message(states).as_bytes(), &self.addr)
            .map(|_| ())
            .map_err(|error| NotifyError::Io {
                socket: self.name.clone(),
                error,
            })
    }

    /// [`notify`](Self::notify), a failure logged: the service keeps
    /// running when the manager cannot be told.
    pub fn tell(&self, states: &[State]) {
        if let Err(e) = self.notify(states) {
            tracing::warn!(error = %e, code = e.code(), "service manager not notified");
        }
    }
}

/// How often the service manager expects `WATCHDOG=1`: `WATCHDOG_USEC`,
/// when set and meant for this process (`WATCHDOG_PID` unset or ours).
pub fn watchdog_timeout_from_env() -> Result<Option<Duration>, NotifyError> {
    let usec = match std::env::var("WATCHDOG_USEC") {
        Ok(s) if !s.is_empty() => s,
        _ => return Ok(None),
    };
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if !pid.is_empty() && pid.trim() != std::process::id().to_string() {
            return Ok(None);
        }
    }
    match usec.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(Some(Duration::from_micros(n))),
        _ => Err(NotifyError::BadWatchdog(usec)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_assignment_a_line_and_a_status_stays_on_one() {
        let m = message(&[State::Ready, State::Status("ready\nREADY=0".into())]);
        assert_eq!(m, "READY=1\nSTATUS=ready READY=0\n");
    }

    #[test]
    fn a_relative_socket_is_refused() {
        let e = Notifier::connect("run/notify").unwrap_err();
        assert_eq!(e.code(), "notify.address");
    }

    #[test]
    fn datagrams_reach_a_path_and_an_abstract_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::connect(path.to_str().unwrap()).unwrap();
        n.notify(&[State::Watchdog]).unwrap();
        let mut buf = [0u8; 256];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1\n");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("pivgate-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
        let n = Notifier::connect(&format!("@{name}")).unwrap();
        n.notify(&[State::Stopping]).unwrap();
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STOPPING=1\n");
    }

    #[test]
    fn sending_to_nobody_is_an_error_with_a_code() {
        let dir = tempfile::tempdir().unwrap();
        let n = Notifier::connect(dir.path().join("absent").to_str().unwrap()).unwrap();
        assert_eq!(n.notify(&[State::Ready]).unwrap_err().code(), "notify.io");
    }
}
