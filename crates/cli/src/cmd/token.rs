//! `pivgate token`: API bearer tokens, created, listed and deleted on the
//! machine (a secret never crosses the network). Creation and deletion go
//! through the service's change path, so each is an admin event.

use std::path::PathBuf;
use std::process::ExitCode;

use access::jiff::Timestamp;
use access::{DoorId, ReaderId};
use clap::Subcommand;
use server::admin::{AccessData, DeleteToken};
use server::token::{issue, list_text, parse_expiry, NewToken};
use store::Role;

/// Who the events of these commands name.
const ACTOR: &str = "pivgate token";

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create an API token; it is printed once and stored only as a hash.
    Create {
        /// viewer (read), operator (also door commands), admin (everything),
        /// or keypad (a PIN pad at a card + PIN door: may only send PINs,
        /// to the doors given with --door).
        #[arg(long)]
        role: Role,
        /// A name for the token (shown in the event log of its changes).
        #[arg(long)]
        name: Option<String>,
        /// A door (id) a keypad token may send PINs to; repeat for more.
        #[arg(long = "door", value_name = "ID")]
        doors: Vec<i64>,
        /// The one reader (id) of those doors a keypad token's PINs are for.
        #[arg(long, value_name = "ID")]
        reader: Option<i64>,
        /// When the token stops working: a duration (90d, 12h, 2w) or an
        /// RFC 3339 time.
        #[arg(long)]
        expires: Option<String>,
        #[arg(long, env = "PIVGATE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// List tokens: name, role, doors (reader), created, expires, last used.
    List {
        #[arg(long, env = "PIVGATE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Delete a token by name.
    Delete {
        name: String,
        #[arg(long, env = "PIVGATE_CONFIG")]
        config: Option<PathBuf>,
    },
}

pub fn token(c: TokenCommand) -> anyhow::Result<ExitCode> {
    let config = match &c {
        TokenCommand::Create { config, .. }
        | TokenCommand::List { config }
        | TokenCommand::Delete { config, .. } => config.clone(),
    };
    let config = server::service::resolve_config(config.as_deref())?;
    server::service::with_store(&config, async |store| {
        run(c, &AccessData::offline(store.clone())).await
    })
}

async fn run(c: TokenCommand, access: &AccessData) -> anyhow::Result<ExitCode> {
    match c {
        TokenCommand::Create {
            role,
            name,
            doors,
            reader,
            expires,
            ..
        } => {
            let name = name.map_or_else(|| server::token::default_name(role), Ok)?;
            let expires_at = expires
                .map(|e| parse_expiry(&e, Timestamp::now()))
                .transpose()?;
            let new = NewToken {
                name,
                role,
                doors: doors.into_iter().map(DoorId).collect(),
                reader: reader.map(ReaderId),
                expires_at,
            };
            let (text, t) = issue(access, ACTOR, new).await?;
            eprintln!("{}", server::token::created_line(&t));
            println!("{text}");
        }
        TokenCommand::List { .. } => {
            print!("{}", list_text(&access.store().list_tokens().await?));
        }
        TokenCommand::Delete { name, .. } => {
            access.change(ACTOR, DeleteToken(name.clone())).await?;
            println!("deleted token `{name}`");
        }
    }
    Ok(ExitCode::SUCCESS)
}
