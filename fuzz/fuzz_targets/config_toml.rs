//! Fuzzes the configuration file: TOML text parsed into
//! `server::config::Config` and checked as `pivgate serve` checks it
//! (including the seed's entities). A configuration that passes the check must print
//! as TOML that parses back to the same configuration. Nothing may panic.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use server::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let origin = Path::new("pivgate.toml");
    let Ok(config) = Config::parse(text, origin) else {
        return;
    };
    let valid = config.check(origin).is_ok();
    if let Some(seed) = &config.seed {
        let _ = seed.entities();
    }
    if !valid {
        // Only a configuration the service accepts must print back the same
        // (a NaN is never equal to itself).
        let _ = config.to_string();
        return;
    }
    let shown = config.to_string();
    let again = Config::parse(&shown, origin)
        .unwrap_or_else(|e| panic!("printed configuration does not parse: {e}\n{shown}"));
    assert_eq!(again, config, "printed configuration reads differently");
});
