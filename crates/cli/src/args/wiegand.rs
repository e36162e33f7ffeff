//! `--wiegand-out`: the frame a Wiegand reader module would send its panel
//! after a granted tap ([`links::wiegand::TimedFrame`]).

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use links::wiegand::{CardIds, CredentialFormat, TimedFrame, Timing};

#[derive(Clone, Copy, ValueEnum)]
pub enum WiegandFormat {
    /// The full 25-byte FASC-N, 200 bits.
    Fascn200,
    /// 26-bit H10301: --wiegand-facility and the FASC-N credential number
    /// (which must be below 65536).
    H10301,
    /// 75-bit PIV: the FASC-N agency code, system code and credential number
    /// with the card's expiration date.
    Piv75,
    /// 48-bit HID Corporate 1000: --wiegand-facility as the company ID and
    /// the FASC-N credential number as the card number.
    Corporate1000,
    /// The card's 16-byte UUID, 128 bits, no parity.
    Uuid128,
}

/// Where a granted tap's credential goes as a Wiegand frame.
#[derive(Args)]
pub struct WiegandArgs {
    /// After a granted tap, write the Wiegand frame a reader module would
    /// send its legacy panel: the bits, each pulse's offset and line
    /// (DATA0/DATA1), and the frame's time on the wire — to FILE, or `-` for
    /// standard output. This records the frame; it drives no GPIO lines.
    #[arg(long, value_name = "FILE|-")]
    pub wiegand_out: Option<String>,
    /// Frame format.
    #[arg(long, value_enum, default_value = "fascn200")]
    pub wiegand_format: WiegandFormat,
    /// Facility code for H10301 (0–255), or company ID for Corporate 1000
    /// (0–4194303).
    #[arg(long)]
    pub wiegand_facility: Option<u32>,
    /// Pulse width in microseconds.
    #[arg(long, default_value_t = 50)]
    pub wiegand_pulse_us: u64,
    /// Time from one pulse's start to the next one's, in microseconds.
    #[arg(long, default_value_t = 2000)]
    pub wiegand_interval_us: u64,
}

impl WiegandArgs {
    /// The frame of a granted card's credential these arguments ask for.
    pub fn frame(&self, card: &auth::CardIdentity) -> Result<TimedFrame> {
        let format = match self.wiegand_format {
            WiegandFormat::Fascn200 => CredentialFormat::Fascn200,
            WiegandFormat::H10301 => CredentialFormat::H10301 {
                facility: self.wiegand_facility,
            },
            WiegandFormat::Piv75 => CredentialFormat::Piv75,
            WiegandFormat::Corporate1000 => CredentialFormat::Corporate1000 {
                company: self.wiegand_facility,
            },
            WiegandFormat::Uuid128 => CredentialFormat::Uuid128,
        };
        let ids = CardIds {
            fascn: card.fascn.as_ref(),
            uuid: card.uuid.as_ref().map(|u| u.as_bytes()),
            expiration: card.expiration_date(),
        };
        let timing = Timing {
            pulse_width: Duration::from_micros(self.wiegand_pulse_us),
            bit_interval: Duration::from_micros(self.wiegand_interval_us),
        };
        Ok(TimedFrame::for_credential(format, ids, timing)?)
    }
}

/// Writes `frame`'s record ([`TimedFrame::record`]) to `to`, or to standard
/// output for `-`.
pub fn write_frame(frame: &TimedFrame, to: &str) -> Result<()> {
    let text = frame.record();
    if to == "-" {
        print!("{text}");
        return Ok(());
    }
    std::fs::write(to, text).with_context(|| format!("cannot write {to}"))
}
