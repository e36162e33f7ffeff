//! The vpcd connector: the card side of the vsmartcard virtual reader.
//!
//! The card connects as a TCP client to the vpcd driver loaded by pcscd
//! (default `127.0.0.1:35963`). Every message both ways is a 2-byte
//! big-endian length and a payload. A 1-byte message from vpcd is control:
//! `00` power off, `01` power on, `02` reset, `04` get ATR (only get ATR is
//! answered); anything longer is an APDU, answered with the response APDU.
//! When vpcd goes away the connector reconnects with backoff; it returns
//! when the shutdown flag is set.

use crate::runner::Runner;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use zeroize::Zeroizing;

/// The default vpcd address (reader "Virtual PCD 00 00").
pub const DEFAULT_ADDR: &str = "127.0.0.1:35963";

const POLL: Duration = Duration::from_millis(100);
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Why the connector stopped.
#[derive(Debug, Error)]
pub enum VpcdError {
    #[error("cannot resolve vpcd address {addr}: {source}")]
    Resolve {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error("vpcd address {0} resolves to nothing")]
    NoAddress(String),
}

/// Connector options.
#[derive(Debug, Clone)]
pub struct Options {
    /// `host:port` of vpcd.
    pub addr: String,
    /// Set to stop the connector (from a signal handler or a test).
    pub shutdown: Arc<AtomicBool>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            addr: DEFAULT_ADDR.into(),
            shutdown: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// Runs the card behind vpcd until `opts.shutdown` is set.
pub fn run(runner: &mut Runner, opts: &Options) -> Result<(), VpcdError> {
    let addr = resolve(&opts.addr)?;
    let mut backoff = MIN_BACKOFF;
    while !opts.shutdown.load(Ordering::SeqCst) {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(stream) => {
                tracing::info!("connected to vpcd at {addr}");
                backoff = MIN_BACKOFF;
                match serve(runner, stream, &opts.shutdown) {
                    Ok(()) => tracing::info!("vpcd closed the connection"),
                    Err(e) => tracing::warn!("vpcd connection lost: {e}"),
                }
                // Losing the reader is a power loss for the card.
                runner.power_off();
            }
            Err(e) => {
                tracing::debug!("vpcd at {addr} not reachable ({e}); retrying in {backoff:?}");
                sleep_unless_shutdown(backoff, &opts.shutdown);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    Ok(())
}

/// A card served behind vpcd from a background thread (tests, demos,
/// benchmarks); the connector stops, and the card leaves the reader, when
/// this is dropped.
pub struct Background {
    shutdown: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), VpcdError>>>,
}

impl Background {
    /// Starts `runner` behind vpcd at `addr`.
    pub fn spawn(mut runner: Runner, addr: &str) -> Background {
        let opts = Options {
            addr: addr.to_string(),
            shutdown: Arc::new(AtomicBool::new(false)),
        };
        let shutdown = opts.shutdown.clone();
        let thread = std::thread::spawn(move || run(&mut runner, &opts));
        Background {
            shutdown,
            thread: Some(thread),
        }
    }

    /// Stops the connector and returns how it ended.
    pub fn stop(mut self) -> Result<(), VpcdError> {
        match self.finish() {
            Some(Ok(r)) => r,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> Option<std::thread::Result<Result<(), VpcdError>>> {
        self.shutdown.store(true, Ordering::SeqCst);
        self.thread.take().map(|t| t.join())
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        match self.finish() {
            Some(Ok(Err(e))) => tracing::error!("vpcd connector ended with an error: {e}"),
            Some(Err(_)) => tracing::error!("vpcd connector thread panicked"),
            _ => {}
        }
    }
}

fn resolve(addr: &str) -> Result<SocketAddr, VpcdError> {
    addr.to_socket_addrs()
        .map_err(|source| VpcdError::Resolve {
            addr: addr.into(),
            source,
        })?
        .next()
        .ok_or_else(|| VpcdError::NoAddress(addr.into()))
}

fn sleep_unless_shutdown(total: Duration, shutdown: &AtomicBool) {
    let end = Instant::now() + total;
    while !shutdown.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(POLL));
    }
}

/// Serves one vpcd connection; returns `Ok` on orderly close or shutdown.
fn serve(runner: &mut Runner, mut stream: TcpStream, shutdown: &AtomicBool) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    let mut frames = FrameReader::default();
    loop {
        if shutdown.load(Ordering::SeqCst) {
            return Ok(());
        }
        quick_ack(&stream);
        let (message, arrived) = match frames.next(&mut stream)? {
            Next::Frame(m, t) => (m, t),
            Next::Idle => continue,
            Next::Closed => return Ok(()),
        };
        match message.as_slice() {
            [0x00] => runner.power_off(),
            [0x01] => runner.power_on(),
            [0x02] => runner.reset(),
            [0x04] => send(&mut stream, runner.card().atr())?,
            [other] => tracing::warn!("ignoring unknown vpcd control byte {other:02X}"),
            apdu => {
                let answer = runner.transmit_at(apdu, arrived);
                send(&mut stream, &answer)?;
            }
        }
    }
}

/// vpcd writes the 2-byte length and the payload as two segments; with
/// Nagle's algorithm on its side, the payload waits for our ACK of the
/// length, which Linux delays by up to 40 ms. Asking for immediate ACKs
/// (re-armed before every read, as the kernel clears the flag) removes
/// that stall from every exchange.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn quick_ack(stream: &TcpStream) {
    if let Err(e) = socket2::SockRef::from(stream).set_quickack(true) {
        tracing::debug!("TCP_QUICKACK not available: {e}");
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn quick_ack(_stream: &TcpStream) {}

fn send(stream: &mut TcpStream, payload: &[u8]) -> io::Result<()> {
    let len = u16::try_from(payload.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "response longer than 65535 bytes",
        )
    })?;
    let mut frame = Zeroizing::new(Vec::with_capacity(payload.len() + 2));
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(payload);
    stream.write_all(&frame)
}

/// What the frame reader saw.
enum Next {
    /// A whole message; wiped when dropped (a VERIFY carries the PIN).
    Frame(Zeroizing<Vec<u8>>, Instant),
    /// Read timeout with no complete frame.
    Idle,
    /// The peer closed between messages.
    Closed,
}

/// Accumulates bytes into length-prefixed frames across read timeouts.
#[derive(Default)]
struct FrameReader {
    /// Bytes read and not yet framed; wiped when dropped.
    buf: Zeroizing<Vec<u8>>,
    /// When the first byte of the frame being assembled arrived.
    started: Option<Instant>,
}

impl FrameReader {
    /// Returns a buffered frame, or performs one read; `Idle` when no frame
    /// is complete yet (after a read timeout or a partial read).
    fn next(&mut self, stream: &mut impl Read) -> io::Result<Next> {
        loop {
            if let Some((frame, at)) = self.take_frame() {
                return Ok(Next::Frame(frame, at));
            }
            let mut chunk = Zeroizing::new([0u8; 4096]);
            match stream.read(&mut chunk[..]) {
                Ok(0) => {
                    return if self.buf.is_empty() {
                        Ok(Next::Closed)
                    } else {
                        Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "vpcd closed mid-message",
                        ))
                    }
                }
                Ok(n) => {
                    self.started.get_or_insert_with(Instant::now);
                    self.buf.extend_from_slice(&chunk[..n]);
                    // Hand back to the caller between reads (it re-arms
                    // quick ACKs) unless a frame is complete.
                    if let Some((frame, at)) = self.take_frame() {
                        return Ok(Next::Frame(frame, at));
                    }
                    return Ok(Next::Idle);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Next::Idle)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn take_frame(&mut self) -> Option<(Zeroizing<Vec<u8>>, Instant)> {
        let len = match self.buf.as_slice() {
            [hi, lo, ..] => usize::from(u16::from_be_bytes([*hi, *lo])),
            _ => return None,
        };
        if self.buf.len() < 2 + len {
            return None;
        }
        let frame = Zeroizing::new(self.buf[2..2 + len].to_vec());
        let before = self.buf.len();
        self.buf.drain(..2 + len);
        // The bytes the drain moved past the end stay in the allocation:
        // wipe them (they may hold a PIN).
        let moved = before - self.buf.len();
        for b in self.buf.spare_capacity_mut().iter_mut().take(moved) {
            b.write(0);
        }
        let arrived = self.started.take().unwrap_or_else(Instant::now);
        if !self.buf.is_empty() {
            self.started = Some(Instant::now());
        }
        Some((frame, arrived))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::CardImage;
    use crate::profile::TimingProfile;
    use crate::Card;
    use std::net::TcpListener;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u16).to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    }

    fn read_frame(s: &mut TcpStream) -> Vec<u8> {
        let mut len = [0u8; 2];
        s.read_exact(&mut len).unwrap();
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        s.read_exact(&mut buf).unwrap();
        buf
    }

    /// A fake vpcd on loopback: checks ATR, power handling, APDUs split
    /// across TCP writes, and reconnection after the reader goes away.
    #[test]
    fn speaks_the_vpcd_protocol_and_reconnects() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let opts = Options {
            addr: listener.local_addr().unwrap().to_string(),
            shutdown: Arc::new(AtomicBool::new(false)),
        };
        let stop = opts.shutdown.clone();
        let card_thread = std::thread::spawn(move || {
            let mut runner = Runner::new(
                Card::new(CardImage::new_blank(Some(9))),
                None,
                TimingProfile::Instant,
            );
            run(&mut runner, &opts)
        });
        for round in 0..2 {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(&frame(&[0x04])).unwrap();
            assert_eq!(read_frame(&mut s), crate::ATR.to_vec(), "round {round}");
            s.write_all(&frame(&[0x01])).unwrap();
            let select = frame(&[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8]);
            s.write_all(&select[..3]).unwrap();
            std::thread::sleep(Duration::from_millis(150));
            s.write_all(&select[3..]).unwrap();
            let answer = read_frame(&mut s);
            assert_eq!(&answer[answer.len() - 2..], &[0x90, 0x00]);
            s.write_all(&frame(&[0, 0xF8, 0, 0])).unwrap();
            assert_eq!(read_frame(&mut s), vec![0, 0, 0, 9, 0x90, 0]);
            // Power off clears the selection.
            s.write_all(&frame(&[0x00])).unwrap();
            s.write_all(&frame(&[0x01])).unwrap();
            s.write_all(&frame(&[0, 0xF8, 0, 0])).unwrap();
            assert_eq!(read_frame(&mut s), vec![0x69, 0x85]);
            drop(s);
        }
        stop.store(true, Ordering::SeqCst);
        card_thread.join().unwrap().unwrap();
    }
}
