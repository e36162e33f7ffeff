//! Validation results for people and as JSON (`pki verify*`); the path
//! itself is rendered by `pki::fips201::report`.

use serde_json::json;
use std::process::ExitCode;

pub fn print_invalid(json: bool, kind: &str, code: &str, reason: &str) -> ExitCode {
    if json {
        println!(
            "{}",
            json!({ "valid": false, "kind": kind, "code": code, "error": reason })
        );
    } else {
        println!("INVALID: {reason}");
    }
    ExitCode::from(1)
}
