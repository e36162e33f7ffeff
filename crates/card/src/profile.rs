//! Timing profiles: how long an exchange takes on a card, so that demos
//! and benchmarks can reproduce real cards. A profile shapes time only,
//! never the protocol: the same bytes come back whatever the profile.
//!
//! | profile | model |
//! |---|---|
//! | `instant` | no added time (default) |
//! | `contactless` | transfer of command + response bytes at 106 kbit/s (ISO/IEC 14443 type A/B base rate, 8 bits per byte; frame overhead ignored) |
//! | `seed-rsa2048`, `seed-p256` | card processing times of the seed door measurements (below) |
//!
//! The seed measurement is 1367 ms of card time for a PKI-CAK transaction
//! on an RSA-2048 card (SELECT + read CHUID + read the 9E certificate +
//! GENERAL AUTHENTICATE), and about 1.1 s less (267 ms) with P-256. The
//! cost is split per command:
//!
//! | command | cost |
//! |---|---|
//! | SELECT | 25 ms |
//! | GET DATA (one object; its GET RESPONSE continuations are free) | 75 ms |
//! | VERIFY, CHANGE REFERENCE DATA, RESET RETRY COUNTER | 40 ms |
//! | GENERAL AUTHENTICATE, RSA-2048 | 1192 ms |
//! | GENERAL AUTHENTICATE, RSA-3072 / RSA-4096 | 3500 / 8000 ms |
//! | GENERAL AUTHENTICATE, P-256 / P-384 | 92 / 150 ms |
//! | GENERAL AUTHENTICATE, management key | 20 ms |
//! | GENERATE ASYMMETRIC KEY PAIR | RSA 10 s, EC 300 ms |
//! | intermediate link of a command chain, GET RESPONSE | 0 ms |
//! | anything else | 10 ms |
//!
//! so that 25 + 75 + 75 + 1192 = 1367 ms (RSA-2048) and
//! 25 + 75 + 75 + 92 = 267 ms (P-256). `seed-rsa2048` and `seed-p256`
//! model the same card; the transaction time differs through the key the
//! card holds, and both names exist so that a configuration says which
//! measurement it reproduces. Failed commands (any status other than
//! `9000`/`61xx`) cost 10 ms. Seed profiles charge processing only: the
//! reader link is a separate stage of the door measurement.

use std::time::Duration;

/// A timing profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimingProfile {
    #[default]
    Instant,
    Contactless,
    SeedRsa2048,
    SeedP256,
}

/// Bit rate of the contactless profile.
pub const CONTACTLESS_BITS_PER_SECOND: u64 = 106_000;

impl TimingProfile {
    /// All profiles, for help texts.
    pub const ALL: [TimingProfile; 4] = [
        TimingProfile::Instant,
        TimingProfile::Contactless,
        TimingProfile::SeedRsa2048,
        TimingProfile::SeedP256,
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            TimingProfile::Instant => "instant",
            TimingProfile::Contactless => "contactless",
            TimingProfile::SeedRsa2048 => "seed-rsa2048",
            TimingProfile::SeedP256 => "seed-p256",
        }
    }

    /// How long the exchange of `command` and its `response` (data +
    /// SW1 SW2) should take.
    pub fn exchange_time(self, command: &[u8], response: &[u8]) -> Duration {
        match self {
            TimingProfile::Instant => Duration::ZERO,
            TimingProfile::Contactless => transfer_time(command.len() + response.len()),
            TimingProfile::SeedRsa2048 | TimingProfile::SeedP256 => {
                seed_processing_time(command, response)
            }
        }
    }
}

impl std::str::FromStr for TimingProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TimingProfile::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = TimingProfile::ALL.iter().map(|p| p.name()).collect();
            format!(
                "unknown profile {s:?}; expected one of {}",
                names.join(", ")
            )
        })
    }
}

impl std::fmt::Display for TimingProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn transfer_time(bytes: usize) -> Duration {
    let bits = bytes as u64 * 8;
    Duration::from_nanos(bits * 1_000_000_000 / CONTACTLESS_BITS_PER_SECOND)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn seed_processing_time(command: &[u8], response: &[u8]) -> Duration {
    let [cla, ins, p1, ..] = *command else {
        return ms(10);
    };
    let ok = matches!(response, [.., 0x90, 0x00] | [.., 0x61, _]);
    if !ok {
        return ms(10);
    }
    if cla & 0x10 != 0 {
        return Duration::ZERO;
    }
    match ins {
        0xA4 => ms(25),
        0xCB => ms(75),
        0xC0 => Duration::ZERO,
        0x20 | 0x24 | 0x2C => ms(40),
        0x87 => match piv::Algorithm::from_id(p1) {
            Some(piv::Algorithm::Rsa2048) => ms(1192),
            Some(piv::Algorithm::Rsa3072) => ms(3500),
            Some(piv::Algorithm::Rsa4096) => ms(8000),
            Some(piv::Algorithm::EccP256) => ms(92),
            Some(piv::Algorithm::EccP384) => ms(150),
            _ => ms(20),
        },
        0x47 => {
            let rsa = command
                .windows(3)
                .any(|w| w[0] == 0x80 && w[1] == 1 && matches!(w[2], 0x05 | 0x07 | 0x16));
            if rsa {
                ms(10_000)
            } else {
                ms(300)
            }
        }
        _ => ms(10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &[u8] = &[0x90, 0x00];

    #[test]
    fn seed_transactions_add_up_to_the_measurements() {
        let select = [0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8];
        let chuid = [0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x02, 0];
        let cert = [0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x01, 0];
        let get_response = [0, 0xC0, 0, 0, 0];
        let chained = [0x10, 0x87, 7, 0x9E, 1, 0];
        let ga = |alg| [0, 0x87, alg, 0x9E, 1, 0];
        for (profile, alg, total) in [
            (TimingProfile::SeedRsa2048, 7, 1367),
            (TimingProfile::SeedP256, 0x11, 267),
        ] {
            let t = profile.exchange_time(&select, OK)
                + profile.exchange_time(&chuid, OK)
                + profile.exchange_time(&cert, &[0x61, 0x00])
                + profile.exchange_time(&get_response, OK)
                + profile.exchange_time(&chained, OK)
                + profile.exchange_time(&ga(alg), OK);
            assert_eq!(t, Duration::from_millis(total), "{profile}");
        }
        assert_eq!(
            TimingProfile::SeedP256.exchange_time(&ga(7), &[0x6A, 0x80]),
            ms(10)
        );
    }

    #[test]
    fn contactless_charges_bytes_and_instant_nothing() {
        assert_eq!(
            TimingProfile::Instant.exchange_time(&[0; 300], &[0; 300]),
            Duration::ZERO
        );
        // 265 bytes = 2120 bits at 106 kbit/s = 20 ms.
        assert_eq!(
            TimingProfile::Contactless.exchange_time(&[0; 263], OK),
            ms(20)
        );
        assert_eq!(
            "seed-p256".parse::<TimingProfile>().unwrap(),
            TimingProfile::SeedP256
        );
        assert!("fast"
            .parse::<TimingProfile>()
            .unwrap_err()
            .contains("instant"));
        for p in TimingProfile::ALL {
            assert_eq!(TimingProfile::from_name(p.name()), Some(p));
        }
    }
}
