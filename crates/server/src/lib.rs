//! The door service (`pivgate serve`): one process is the authentication
//! module and the controller.
//!
//! - [`config`]: `pivgate.toml` (serde + toml, unknown keys refused, errors
//!   name the file, line, column and key), embedding
//!   [`pki::trust::TrustConfig`]; an optional seed (site, doors, reader
//!   bindings, schedules, groups) written to an empty database once.
//! - [`init`]: `pivgate init [DIR]` writes a commented configuration and a
//!   test PKI; [`demo`]: the door demo's site and its CRL publisher.
//! - [`trust`]: the configured trust with the CRLs the service downloaded
//!   and kept, for the service and the commands beside it.
//! - [`door`]: the tap pipeline. [`door::Controller`] (one per process, every
//!   door) finds the reader's door, authenticates with the door's mechanism through the shared
//!   [`auth::Authenticator`], decides on the current
//!   [`access::AccessSnapshot`], commits the event through the group-commit
//!   [`store::EventLog`] and only then signals the [`door::DoorOutput`]
//!   (simulated, or an OSDP reader's output: [`osdp::OsdpOutput`]). Sans-network: it takes any [`host::Transport`], so
//!   tests drive it with in-process software cards. It drives each door in
//!   its effective mode (stored mode, site lockdown, unlock schedule and
//!   first-card unlock: [`access::AccessSnapshot::effective_mode`]), with one
//!   timer to the next window boundary ([`door::Controller::run_schedules`]).
//! - [`admin`]: the one change path for access data. Every change (the
//!   API's entities, door modes, token deletion, enrollment, re-validation)
//!   is an [`admin::Edit`] given to [`admin::AccessData::change`]: checked
//!   against every stored entity, written with its audit events in one
//!   transaction, then swapped into the controller.
//! - [`enroll`]: full validation of a card (or of a certificate alone),
//!   then registration with the certificate kept (the API's
//!   `POST /api/v1/credentials/enroll` uses it).
//! - [`revocation`]: CRLs downloaded from the distribution points in the
//!   background, refreshed before nextUpdate, kept on disk under
//!   `<data_dir>/crls/` and swapped into the authenticator without pausing
//!   taps; the stale-data policy (`[revocation] stale`: refuse or a grace
//!   period); every enrolled credential re-validated at least daily, and
//!   suspended with an event when found revoked or expired.
//! - [`discovery`]: intermediates a certificate being enrolled needs,
//!   found over its AIA/SIA URIs (`http://`, `https://`) and added to the
//!   trust store; found again in the background pass [`revocation`] runs
//!   every `[trust.discovery] refresh` for enrolled certificates with no
//!   path or with discovered certificates about to run out (never during a
//!   tap).
//! - [`ocsp_disk`]: the OCSP answers [`revocation`] got, kept under
//!   `<data_dir>/ocsp/` and read back at start-up before the first tap.
//! - [`keypad`]: PIN entries for card + PIN doors whose reader has no PIN
//!   pad, sent by a keypad at the door through the API.
//! - [`source`]: reader sources. PC/SC readers, OSDP ports and remote
//!   readers are each a [`source::ReaderSource`], started with a
//!   [`source::TapContext`] (in order, stopped in reverse); every card,
//!   whatever the reader, goes through [`source::TapContext::tap`] to the
//!   controller's one tap path.
//! - [`readers`]: the PC/SC source, one blocking thread per PC/SC reader
//!   bound to a door, event-driven (`SCardGetStatusChange` through
//!   [`host::Watch`]).
//! - [`osdp`]: OSDP readers on serial lines (`[[osdp.ports]]`): a control
//!   panel per port, reader online/offline/refused/tamper/power events,
//!   cards authenticated by the controller through the reader's transparent
//!   mode (card data alone refused), keypad PINs, LED and buzzer feedback,
//!   and the lock relay on the reader's output.
//! - [`alarm`]: door inputs (position switch, request-to-exit, tamper,
//!   supervised lines) and alarms (forced, held open with a pre-alarm,
//!   tamper, line faults; active → acknowledged → cleared), one pure state
//!   machine with time passed in; [`doorwatch`] runs it: inputs from the
//!   OSDP readers (`osdp_ISTATR`), events to the log, relock on close,
//!   a timer to the next deadline.
//! - [`interlock`]: interlock groups (mantraps, `[[interlocks]]`): a door
//!   of a group does not release while another is open or released,
//!   checked at the moment of opening (refusal code `interlock`).
//! - [`http`]: the axum API, one module per resource, with bearer-token
//!   role extractors and one error type; it reads the service through
//!   [`state`] and nothing outside it but [`service`] imports it; [`token`]: token
//!   generation and hashing; [`tls`]: rustls when a certificate is
//!   configured (without one the API listens on loopback only);
//!   [`api_client`]: the API's client for the command line (`pivgate
//!   lockdown`).
//! - [`live`]: following the event log live (served as Server-Sent Events
//!   by the API): every event as it is committed, resumable without gaps
//!   or duplicates; a follower that falls behind catches up from the store
//!   and never slows the writer.
//! - [`metrics`]: Prometheus metrics at `/metrics` (viewer token): taps by
//!   door, mechanism and result, a latency histogram per stage, event-log
//!   commits, trust store, CRL ages, cache hits, start-up times.
//! - [`logging`]: log lines as text or JSON (`--log-format json`; with the
//!   feature `clap`, [`logging::LogFormat`] derives `clap::ValueEnum`), the
//!   level from `PIVGATE_LOG`.
//! - [`stats`]: tap latency percentiles per stage and time bucket (pure
//!   functions).
//! - [`status`]: reader connections, the latest tap of every door and
//!   recent `signal` stages, kept in memory for the dashboard's routes.
//! - [`state`]: what the API reaches of the running service
//!   ([`state::AppState`], [`state::Loaded`]), filled by [`service`].
//! - [`backup`]: `pivgate backup` / `pivgate restore` over the configuration.
//! - [`export`]: events sent to SIEMs, each sink a task reading the event
//!   log after its durable cursor: syslog over TCP or TLS (RFC 5424 with
//!   the event's fields as structured data, or CEF; octet-counting
//!   framing) and webhooks (JSON, HMAC-SHA256 signed); at least once, in
//!   order, retried with backoff, woken by the live broadcast.
//! - [`retention`]: old events exported to gzip JSON Lines per UTC day with
//!   a SHA-256 manifest, then deleted in short transactions; in the
//!   service (`[retention]`) a background task at a time of day or an
//!   interval, its deletions on the event log's writer between taps'
//!   commits.
//! - [`sync`]: many sites, one central. Events go up exactly once: the
//!   site's [`sync::upload::Uploader`] (woken by commits, batches, backs
//!   off) sends what follows the central's acknowledgement over a
//!   [`sync::upload::Uplink`]; the central's [`sync::ingest::post_events`]
//!   stores it `ON CONFLICT DO NOTHING` and acknowledges the highest
//!   gap-free sequence ([`sync::wire`]).
//! - [`notify`]: the systemd notification protocol (`READY=1`, `STATUS=`,
//!   `STOPPING=1`, `WATCHDOG=1`) over `NOTIFY_SOCKET`; [`health`]: the taps
//!   in progress; [`watchdog`]: `WATCHDOG=1` only while no tap is stuck
//!   and the event log's writer runs.
//! - [`service`]: start-up (linear, trust loading overlapped with the
//!   database), readiness, reload, graceful shutdown; [`service::with_store`]
//!   runs the database work of a command beside the service (`pivgate
//!   token`, `enroll`, `prune`), whose reports the modules say for people
//!   ([`init::Initialised::next_steps`], [`enroll::Enrolled::text`],
//!   [`token::list_text`], [`retention::RetentionReport::text`]).
//!   [`startup_site`] makes a site of N anchors and N credentials to time
//!   that start (the startup bench, `pivgate-bench`).
//! - [`limits`]: every limit the API puts on its clients (timeouts,
//!   connection cap and reserve, event streams, shutdown deadline), set in
//!   `[http]` and enforced by [`http::server`].
//! - [`refusals`]: refused remote-reader connections counted per address
//!   and reason over a window (one event each); [`peer_text`]: text a peer
//!   chose, escaped and capped before it is stored.
//!
//! It re-implements none of the crates below it: it wires them. A tap's
//! path and a change's path, file by file, are in the repository's
//! `ARCHITECTURE.md`.

pub mod admin;
pub mod alarm;
pub mod api_client;
pub mod backup;
pub mod config;
pub mod demo;
pub mod demo_sites;
pub mod discovery;
pub mod door;
pub mod doorwatch;
pub mod enroll;
pub mod export;
pub mod health;
pub mod http;
pub mod init;
pub mod interlock;
pub mod keypad;
pub mod limits;
pub mod live;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod ocsp_disk;
pub mod offline;
pub mod osdp;
pub mod peer_text;
pub mod readers;
pub mod refusals;
pub mod remote;
pub mod retention;
pub mod revocation;
pub mod service;
pub mod source;
pub mod startup_site;
pub mod state;
pub mod stats;
pub mod status;
pub mod sync;
pub mod tls;
pub mod token;
pub mod trust;
pub mod watchdog;
