// The PC/SC test bed shared by the interop tests: pcscd + the vsmartcard
// vpcd driver, with the card's vpcd connector running in a thread, and a
// runner for the off-the-shelf clients.
#![allow(dead_code)]

use card::image::CardImage;
use card::{vpcd, Card, Runner, TimingProfile};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testbed::{run_with_timeout, Pcscd, ToolOutput, VPCD_READER};

pub const TOOL_TIMEOUT: Duration = Duration::from_secs(90);
pub const CARD_TIMEOUT: Duration = Duration::from_secs(20);

/// The card behind vpcd, served from a thread; removed on drop.
pub struct RunningCard(Option<vpcd::Background>);

impl RunningCard {
    pub fn start(image_path: &Path) -> Self {
        let image = CardImage::load(image_path).expect("image loads");
        let runner = Runner::new(
            Card::new(image),
            Some(image_path.to_owned()),
            TimingProfile::Instant,
        );
        let bg = vpcd::Background::spawn(runner, testbed::VPCD_ADDR);
        testbed::wait_for_card(VPCD_READER, CARD_TIMEOUT).expect("card appears in the vpcd reader");
        RunningCard(Some(bg))
    }
}

impl Drop for RunningCard {
    fn drop(&mut self) {
        if let Some(bg) = self.0.take() {
            bg.stop().expect("vpcd connector");
        }
        let _ = testbed::wait_for_card_removed(VPCD_READER, CARD_TIMEOUT);
    }
}

/// Everything one test needs; dropped in field order (card first).
pub struct Bed {
    card: Option<RunningCard>,
    pub dir: tempfile::TempDir,
    pub image: PathBuf,
    _pcscd: testbed::PcscdGuard,
    _lock: testbed::VpcdLock,
}

impl Bed {
    pub fn new(image: CardImage) -> Option<Bed> {
        if std::env::var_os("PIVGATE_SKIP_PCSC").is_some() {
            eprintln!("PIVGATE_SKIP_PCSC set: skipping PC/SC interop test");
            return None;
        }
        let lock = testbed::lock_vpcd();
        let pcscd =
            Pcscd::ensure_started().expect("pcscd starts (run as root with pcscd installed)");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("card.json");
        image.create(&path, false).unwrap();
        let card = RunningCard::start(&path);
        Some(Bed {
            card: Some(card),
            dir,
            image: path,
            _pcscd: pcscd,
            _lock: lock,
        })
    }

    pub fn restart_card(&mut self) {
        self.card = None;
        self.card = Some(RunningCard::start(&self.image));
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

pub fn tool(program: &str, args: &[&str]) -> ToolOutput {
    run_with_timeout(Command::new(program).args(args), TOOL_TIMEOUT)
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

pub fn ok(program: &str, args: &[&str]) -> ToolOutput {
    let out = tool(program, args);
    assert!(out.success(), "{program} {args:?} failed:\n{}", out.text());
    out
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}
