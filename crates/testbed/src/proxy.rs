//! A TCP proxy on loopback that the test controls: each connection it
//! accepts is forwarded to one target, or cut on purpose according to a
//! plan the test gives ([`Fault`] per connection number), so that a client
//! and a server can be tested against connections lost mid-request and
//! answers lost after the server acted.
//!
//! ```no_run
//! use testbed::proxy::{Fault, Proxy};
//! let target = "127.0.0.1:8080".parse().unwrap();
//! // Every other connection loses its request after 100 bytes.
//! let proxy = Proxy::start(target, |n| if n % 2 == 0 { Fault::CutRequestAfter(100) } else { Fault::Pass }).unwrap();
//! let _connect_here = proxy.addr();
//! ```
//!
//! Plain threads and blocking sockets: it works under any runtime, or
//! none. Dropping the proxy stops accepting; connections already forwarded
//! end when their peers close them.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What the proxy does to one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forwards both ways until either side closes.
    Pass,
    /// Forwards the first `n` bytes from the client, then cuts both sides:
    /// the server never sees the whole request.
    CutRequestAfter(usize),
    /// Forwards the whole request, then cuts both sides as the server's
    /// first answer bytes arrive, without passing them on: the server has
    /// acted, the client never learns it.
    DropResponse,
}

struct Shared {
    stop: AtomicBool,
    connections: AtomicU64,
    cuts: AtomicU64,
}

/// A running proxy (see the module documentation).
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on `127.0.0.1` (a free port) and forwards to `target`;
    /// `plan` is asked, for each connection (numbered from 0 in the order
    /// accepted), what to do with it.
    pub fn start(
        target: SocketAddr,
        plan: impl Fn(u64) -> Fault + Send + Sync + 'static,
    ) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if s.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let n = s.connections.fetch_add(1, Ordering::SeqCst);
                    let fault = plan(n);
                    let Ok(server) = TcpStream::connect(target) else {
                        let _ = client.shutdown(Shutdown::Both);
                        continue;
                    };
                    if let Err(e) = connect(&s, client, server, fault) {
                        tracing::warn!(error = %e, "proxy: connection not forwarded");
                    }
                }
            })?;
        Ok(Proxy {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Connections cut on purpose so far.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Starts the two pumps of one connection.
fn connect(s: &Arc<Shared>, client: TcpStream, server: TcpStream, fault: Fault) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (c_in, c_out) = (client.try_clone()?, client);
    let (s_in, s_out) = (server.try_clone()?, server);
    let up_limit = match fault {
        Fault::CutRequestAfter(n) => Some(n),
        _ => None,
    };
    let drop_answer = fault == Fault::DropResponse;
    let (a, b) = (s.clone(), s.clone());
    let (c_cut, s_cut) = (c_out.try_clone()?, s_out.try_clone()?);
    let (c_cut2, s_cut2) = (c_out.try_clone()?, s_out.try_clone()?);
    std::thread::Builder::new()
        .name("proxy-up".into())
        .spawn(move || pump(c_in, s_out, up_limit, false, &a, (&c_cut, &s_cut)))?;
    std::thread::Builder::new()
        .name("proxy-down".into())
        .spawn(move || pump(s_in, c_out, None, drop_answer, &b, (&c_cut2, &s_cut2)))?;
    Ok(())
}

/// Copies `from` to `to`; after `limit` bytes, or at the first bytes when
/// `drop_all`, cuts both sockets of the connection (`both`).
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    limit: Option<usize>,
    drop_all: bool,
    shared: &Shared,
    both: (&TcpStream, &TcpStream),
) {
    let cut = || {
        shared.cuts.fetch_add(1, Ordering::SeqCst);
        let _ = both.0.shutdown(Shutdown::Both);
        let _ = both.1.shutdown(Shutdown::Both);
    };
    let mut buf = [0u8; 16 * 1024];
    let mut sent = 0usize;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        if drop_all {
            cut();
            return;
        }
        let take = match limit {
            Some(l) => n.min(l - sent),
            None => n,
        };
        if to.write_all(&buf[..take]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            return;
        }
        sent += take;
        if limit == Some(sent) {
            cut();
            return;
        }
    }
}
