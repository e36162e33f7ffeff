//! The systemd notification protocol against a datagram socket this test
//! owns: `WATCHDOG=1` flows while the tap path is healthy, stops while a
//! tap is stuck (a lock output that does not answer), and resumes when
//! the tap ends.

mod common;

use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use access::{DoorId, DoorMode};
use server::door::{DoorOutput, OutputError};
use server::notify::Notifier;

/// A lock output that holds every unlock until it is let go.
#[derive(Default)]
struct HeldOutput {
    released: Mutex<bool>,
    wake: Condvar,
}

impl HeldOutput {
    fn release(&self) {
        *self.released.lock().unwrap() = true;
        self.wake.notify_all();
    }
}

impl DoorOutput for HeldOutput {
    fn momentary_unlock(&self, _door: DoorId, _duration: Duration) -> Result<(), OutputError> {
        let mut r = self.released.lock().unwrap();
        while !*r {
            r = self.wake.wait(r).unwrap();
        }
        Ok(())
    }

    fn set_mode(&self, _door: DoorId, _mode: DoorMode) -> Result<(), OutputError> {
        Ok(())
    }
}

/// The next datagram, or `None` when none comes within `wait`.
fn next(rx: &UnixDatagram, wait: Duration) -> Option<String> {
    rx.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 4096];
    match rx.recv(&mut buf) {
        Ok(n) => Some(String::from_utf8(buf[..n].to_vec()).unwrap()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Reads datagrams until one contains `needle`; panics after `limit`
/// datagrams or a silence of 10 s.
fn until(rx: &UnixDatagram, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..1000 {
        let m = next(rx, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no `{needle}` in {seen:?}"));
        let done = m.contains(needle);
        seen.push(m);
        if done {
            return seen;
        }
    }
    panic!("no `{needle}` in {seen:?}")
}

#[test]
fn watchdog_pings_stop_while_a_tap_is_stuck_and_resume_after() {
    let output = Arc::new(HeldOutput::default());
    let site = common::site_with_output(&|_| {}, Some(output.clone()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let rx = UnixDatagram::bind(&path).unwrap();
    let notifier = Arc::new(Notifier::connect(path.to_str().unwrap()).unwrap());
    let every = Duration::from_millis(50);
    let stuck_after = Duration::from_millis(400);
    let dog = {
        let _g = site.rt.enter();
        site.service().start_watchdog(notifier, every, stuck_after)
    };

    // Healthy: pings.
    for _ in 0..3 {
        assert_eq!(
            next(&rx, Duration::from_secs(10)).as_deref(),
            Some("WATCHDOG=1\n")
        );
    }

    // A granted tap whose lock never answers: the tap stays in progress.
    let tap = std::thread::scope(|s| {
        let controller = site.service().loaded().controller.clone();
        let image = site.card.card_image(Some(5)).unwrap();
        let tap = s.spawn(move || {
            let mut t = host::InProcess::new(card::Card::new(image));
            controller.tap(&mut t, common::FRONT, None, None).unwrap()
        });
        let seen = until(&rx, "STATUS=stuck");
        let status = seen.last().unwrap();
        assert!(status.contains("a tap at reader 1"), "{status}");
        assert!(!status.contains("WATCHDOG=1"), "{status}");
        // While it is stuck nothing more is sent: no ping for many
        // intervals.
        let silent = next(&rx, every * 20);
        assert_eq!(silent, None, "sent while a tap is stuck");
        assert!(!tap.is_finished());
        output.release();
        tap.join().unwrap()
    });
    assert!(tap.granted());

    // The tap ended: the status says ready again and pings resume.
    let seen = until(&rx, "WATCHDOG=1");
    let back = seen.last().unwrap();
    assert!(back.contains("STATUS=ready: serving"), "{back}");
    assert!(back.contains("1 taps since start"), "{back}");
    assert_eq!(
        next(&rx, Duration::from_secs(10)).as_deref(),
        Some("WATCHDOG=1\n")
    );

    // It stops with the service.
    let service = {
        let mut site = site;
        let s = site.service.take().unwrap();
        site.rt.block_on(async move {
            s.shutdown().await.unwrap();
            dog.await.unwrap();
        });
        site
    };
    drop(service);
}
