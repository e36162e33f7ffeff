//! The `pivgate` binary: argument parsing and printing only; the work is done
//! by the library crates.
//!
//! Layout: `cmd/<verb>` parses one verb's arguments and prints its result;
//! `args` holds the arguments several verbs share, `render` the printing
//! they share. Imports go one way: `main` → `cmd` → `args`, `render`.

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

mod args;
mod cmd;
mod render;

use cmd::{
    auth, backup, card, demo, lockdown, man, measure, pki, prune, read, reader, restore, serve,
    token,
};

/// PIV / PKI smart-card authentication for physical access control.
#[derive(Parser)]
#[command(name = "pivgate", version, about, long_about = None)]
struct Cli {
    /// Log lines on standard error: text, or json (one object a line, for
    /// journald and log shippers). The level comes from PIVGATE_LOG.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "PIVGATE_LOG_FORMAT"
    )]
    log_format: server::logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Software PIV card: create card images and run them behind a PC/SC reader.
    #[command(subcommand)]
    Card(card::CardCommand),
    /// PKI: verify certificate paths, and issue a test PKI and card credentials.
    #[command(subcommand)]
    Pki(pki::PkiCommand),
    /// Show what the card in a PC/SC reader holds: FASC-N, UUID, expiry,
    /// certificates, policies, key algorithms.
    Read(read::ReadArgs),
    /// Authenticate the card in a PC/SC reader (or, with --osdp, behind an
    /// OSDP reader) with PKI-CAK, PKI-AUTH or CHUID and print the timed
    /// transaction. Exit 0 granted, 1 refused,
    /// 2 usage or I/O error.
    Auth(auth::AuthArgs),
    /// Time the card in a PC/SC reader: power-up, SELECT, each object, VERIFY
    /// (with --pin-stdin), each key's signature and the fast path, N runs
    /// each, beside the reference door's cards. --json writes a report
    /// `pivgate card run --timing-from` replays. Exit 0 measured, 1 wrong or
    /// blocked PIN, 2 errors, 130 interrupted.
    Measure(measure::MeasureArgs),
    /// The door demo: starts the door service in this process on a
    /// temporary database with a test PKI, prints its API URL and an admin
    /// token, enrolls software cards and taps them at simulated doors
    /// (granted, not enrolled, outside schedule, revoked after a CRL
    /// refresh, card + PIN, fast-path repeat), in-process or through pcscd
    /// (--pcsc), printing each decision with its stage table and the door
    /// total beside the reference door. Exit 0 when every tap ended as its
    /// scenario says, 1 when one did not, 2 on errors.
    Demo(demo::DemoArgs),
    /// Write a commented `pivgate.toml` and a test PKI: a working site in
    /// one command.
    Init(serve::InitArgs),
    /// Run the door service: reader watchers, the access decision, the
    /// durable event log and the HTTP API. Stops on SIGTERM or SIGINT;
    /// SIGHUP reloads the access data (after `pivgate enroll`).
    Serve(serve::ServeArgs),
    /// Enroll the card in a PC/SC reader after a full validation (PKI-CAK,
    /// and the CHUID's signature and binding). Exit 0 enrolled, 1 refused.
    Enroll(serve::EnrollArgs),
    /// Offer this host's card reader to a door controller over a reader
    /// link (OSDP, transparent mode).
    #[command(subcommand)]
    Reader(reader::ReaderCommand),
    /// API bearer tokens.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Lock a site down, lift it, or show it, through the running
    /// service's API with a token (--token-file or PIVGATE_TOKEN; the
    /// service at --url or PIVGATE_URL).
    #[command(subcommand)]
    Lockdown(lockdown::LockdownCommand),
    /// Back up the SQLite database while the service runs (consistent:
    /// taps go on); PostgreSQL is refused with the pg_dump recipe.
    Backup(backup::BackupArgs),
    /// Put a backup in place of the SQLite database (stop the service
    /// first; the replaced database is kept as pivgate.db.before-restore).
    Restore(restore::RestoreArgs),
    /// Export the events older than N days to gzip JSON Lines (a file per
    /// UTC day, with a SHA-256 manifest), then delete them; runs beside the
    /// service.
    Prune(prune::PruneArgs),
    /// Write the manual pages (`pivgate.1`, `pivgate-serve.1`, …).
    #[command(hide = true)]
    Man(man::ManArgs),
}

fn main() -> ExitCode {
    // Output cut short by its reader (`pivgate ... | head -1`) ends the
    // process quietly, as for any filter, instead of a panic in `println!`.
    // SAFETY: restores the default disposition of one signal before any
    // thread exists; no handler of ours is involved.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    if let Err(e) = server::logging::init(cli.log_format) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Card(c) => card::run(c),
        Command::Pki(c) => pki::run(c),
        Command::Read(a) => read::run(a),
        Command::Auth(a) => auth::run(a),
        Command::Measure(a) => measure::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Init(a) => serve::init(a),
        Command::Serve(a) => serve::serve(a),
        Command::Token(c) => token::token(c),
        Command::Lockdown(c) => lockdown::run(c),
        Command::Enroll(a) => serve::enroll(a),
        Command::Reader(c) => reader::run(c),
        Command::Backup(a) => backup::run(a),
        Command::Restore(a) => restore::run(a),
        Command::Prune(a) => prune::run(a),
        Command::Man(a) => man::run(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", report(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes, `: `-separated like `{:#}`, leaving out a cause
/// whose text the message already carries (many errors print their source).
fn report(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(card::image::ImageError::Io {
            action: "read",
            path: "card.json".into(),
            source: io,
        })
        .context("loading the card");
        assert_eq!(
            super::report(&e),
            "loading the card: cannot read card image card.json: no such file"
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::report(&e), "outer: inner");
    }
}
