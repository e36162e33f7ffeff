//! Test and benchmark support: a TCP proxy on loopback that delays every
//! byte by a fixed one-way time, to emulate a WAN link between a reader
//! and the service where `tc netem` is not available. Order is kept and
//! data in flight is pipelined (each chunk waits its own delay, not the
//! sum of the chunks before it).

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A running delay proxy; stops when dropped.
pub struct DelayProxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Listens on loopback and forwards each connection to `upstream`,
    /// delaying each direction by `one_way` (a round trip gains twice it).
    pub async fn start(upstream: SocketAddr, one_way: Duration) -> std::io::Result<DelayProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = (down.set_nodelay(true), up.set_nodelay(true));
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    tokio::join!(pump(dr, uw, one_way), pump(ur, dw, one_way));
                });
            }
        });
        Ok(DelayProxy { addr, task })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reading = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    let writing = async move {
        while let Some((at, data)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&data).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reading, writing);
}
