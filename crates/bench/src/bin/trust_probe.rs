//! `pivgate-trust-probe BUNDLE`: loads BUNDLE as trust anchors the way
//! `pivgate serve` and `pivgate pki verify` do (bounded read, strict build:
//! a damaged certificate is an error naming its position), prints how many
//! certificates the store holds, and exits. The trust-load section times
//! this whole process (fork + exec + load + exit) beside the peers.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: pivgate-trust-probe BUNDLE");
        return ExitCode::from(2);
    };
    let mut builder = pki::store::TrustStore::builder();
    let loaded = builder
        .add_anchors_from_path(&path)
        .map_err(|e| e.to_string())
        .and_then(|_| builder.try_build().map_err(|e| e.to_string()));
    match loaded {
        Ok(store) => {
            println!("{}", store.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pivgate-trust-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
