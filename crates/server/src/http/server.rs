//! The API's connections: accepted under [`Limits`], each served by
//! hyper's HTTP/1.1 connection with a header-read timeout, closed when
//! idle, and all closed by the shutdown deadline.
//!
//! - **Cap and reserve.** A connection takes one of `max_connections`
//!   places; when none is free it takes one of `reserved_connections`,
//!   on which only `/healthz` and `/readyz` are served (anything else is
//!   503, and the connection closes after one request); when the reserve
//!   is taken too the connection is closed at once. A flood of slow or
//!   half-sent requests therefore never holds more than
//!   [`Limits::descriptors`] descriptors, and health checks still get
//!   in; the remote-reader port and the readers' own descriptors are
//!   outside these.
//! - **Timeouts.** A request head not complete within
//!   `header_read_timeout` closes the connection (hyper's timer); a
//!   connection with no request in flight for `idle_timeout` is closed.
//!   A request is in flight from its head until its response body ends
//!   (an open event stream is never idle). Once the head is in, the
//!   whole request body must arrive within `body_read_timeout`, however
//!   slowly its bytes come: past it, reading the body fails, the request
//!   is answered 408 and the connection closed (a stalled or trickled
//!   body holds neither a connection nor a task for longer).
//! - **Shutdown.** When `stop` turns true the listener is closed, every
//!   connection is told to finish its request and close, and after
//!   `shutdown_timeout` those still open are dropped: a half-sent
//!   request never holds shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::{header, Request, Response, StatusCode};
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::limits::Limits;

/// The routes a reserved connection serves.
const HEALTH: [&str; 2] = ["/healthz", "/readyz"];

/// Requests in flight on one connection, and when the last one ended.
struct Activity {
    in_flight: AtomicUsize,
    since: Mutex<Instant>,
}

impl Activity {
    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// How long the connection has had no request in flight (zero while
    /// one is).
    fn idle(&self) -> Duration {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        self.since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

/// One request in flight, until its response body is done.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's [`InFlight`] until it ends.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The body of a request that must be read in full by a deadline.
///
/// Past the deadline, the next read fails and `late` is set (the answer
/// is then 408, whatever the handler made of the failed read). The timer
/// is armed only when a read has to wait, so a request whose body is in
/// already (or empty) costs none.
struct Deadlined {
    body: Incoming,
    deadline: tokio::time::Instant,
    /// The time allowed, for the error.
    limit: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    late: Arc<AtomicBool>,
}

/// Reading a request body failed: it did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
struct BodyTimeout(Duration);

impl HttpBody for Deadlined {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(f) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(f.map(|r| r.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.late.store(true, Ordering::Release);
                Poll::Ready(Some(Err(BodyTimeout(this.limit).into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

fn body_too_slow(limit: Duration) -> Response<Body> {
    let body = serde_json::json!({
        "error": format!(
            "the request body did not arrive within {} ms of its head (`http.body_read_timeout_ms`)",
            limit.as_millis()
        )
    });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

fn reserved_only() -> Response<Body> {
    let body = serde_json::json!({
        "error": "the service is serving its most connections; only /healthz and /readyz are answered now: try again later"
    });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    h.insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    h.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

/// Serves `router` on `listener` under `limits` until `stop` turns true,
/// then shuts down within `limits.shutdown_timeout`.
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
{
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let reserve = Arc::new(Semaphore::new(limits.reserved_connections));
    let (closing, closed) = watch::channel(false);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            (io, _) = listener.accept() => {
                let (place, reserved) = match places.clone().try_acquire_owned() {
                    Ok(p) => (p, false),
                    Err(_) => match reserve.clone().try_acquire_owned() {
                        Ok(p) => (p, true),
                        Err(_) => {
                            tracing::debug!("connection closed at once: every place and the reserve are taken");
                            continue;
                        }
                    },
                };
                connections.spawn(connection(io, router.clone(), limits, reserved, closed.clone(), place));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    drop(listener);
    let _ = closing.send(true);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_timeout, drain)
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "connections still open at the shutdown deadline are closed"
        );
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
    Ok(())
}

async fn connection<I>(
    io: I,
    router: Router,
    limits: Limits,
    reserved: bool,
    mut closing: watch::Receiver<bool>,
    _place: OwnedSemaphorePermit,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        since: Mutex::new(Instant::now()),
    });
    let act = activity.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let router = router.clone();
        let in_flight = act.begin();
        let late = Arc::new(AtomicBool::new(false));
        let deadline = tokio::time::Instant::now() + limits.body_read_timeout;
        let too_late = late.clone();
        async move {
            let response = if reserved && !HEALTH.contains(&req.uri().path()) {
                reserved_only()
            } else {
                let req = req.map(|body| {
                    Body::new(Deadlined {
                        body,
                        deadline,
                        limit: limits.body_read_timeout,
                        sleep: None,
                        late,
                    })
                });
                let r = match router.oneshot(req).await {
                    Ok(r) => r,
                    Err(e) => match e {},
                };
                if too_late.load(Ordering::Acquire) {
                    body_too_slow(limits.body_read_timeout)
                } else {
                    r
                }
            };
            Ok::<_, Infallible>(response.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(!reserved);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut check = tokio::time::interval((limits.idle_timeout / 4).max(Duration::from_millis(10)));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutting = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "HTTP connection ended");
                }
                return;
            }
            _ = closing.wait_for(|c| *c), if !shutting => {
                shutting = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = check.tick(), if !shutting => {
                if activity.idle() >= limits.idle_timeout {
                    shutting = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
