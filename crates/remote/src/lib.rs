//! Remote readers over mutual TLS.
//!
//! A reader at a door (the *agent*, `pivgate reader connect`) keeps one
//! persistent TLS 1.3 connection to the authentication service (the
//! [`hub::RemoteHub`]). The service runs the mechanism itself, over a
//! [`host::Transport`] ([`hub::RemoteTap`]) whose APDUs cross the link, so
//! the agent is a pipe: it holds no keys of the door and decides nothing.
//!
//! # Identity
//!
//! Both sides authenticate with certificates ([`tls`]): the agent presents
//! its reader certificate (clientAuth), verified by pivgate's own validator
//! ([`tls::ReaderVerifier`]: RFC 5280 path validation against the device
//! trust store, CRLs failing closed, replaceable while the service runs):
//! an unknown, expired or revoked reader certificate is refused with a
//! [`hub::HubEvent::Refused`] event. A resumed TLS session is checked again,
//! so a reader revoked since its session began is refused too. The
//! certificate's subject common name is mapped to the reader id the
//! service knows; a valid certificate that is not bound to a reader is
//! refused too. The agent verifies the service's certificate (serverAuth,
//! its name or address in subjectAltName) against its own configured CA.
//! There is no plaintext mode.
//!
//! # Framing
//!
//! Every message is one frame ([`proto`]): a 4-byte big-endian payload
//! length, then at most [`proto::MAX_PAYLOAD`] bytes of payload: a 1-byte
//! type and the fields (integers big-endian; byte strings and UTF-8 text
//! with a 2-byte length; lists with a 2-byte count, bounded). A frame that
//! is oversized, truncated, has bytes left over or an unknown type
//! disconnects that peer only.
//!
//! # Messages and versioning
//!
//! | type | message | direction | fields |
//! |---|---|---|---|
//! | `01` | Hello | agent → service | min and max protocol version, agent name, reader name |
//! | `02` | Welcome | service → agent | chosen version, heartbeat interval (ms) |
//! | `03` | Refuse | service → agent | reason; the connection closes |
//! | `10` | Prepare | service → agent | challenge id, lifetime (ms), steps |
//! | `11` | CardPresent | agent → service | card presence number, optional (challenge id, answers) |
//! | `12` | CardRemoved | agent → service | card presence number |
//! | `13` | Run | service → agent | request number, steps |
//! | `14` | Ran | agent → service | request number, answers |
//! | `15` | TapEnd | service → agent | card presence number, granted, text |
//! | `20`/`21` | Ping/Pong | both | nonce |
//!
//! A *step* is a command APDU and a flag: follow `61xx` with GET RESPONSE
//! (`00 C0 00 00 xx`) until the card stops. An *answer* is a status (ok, no
//! card, failed, skipped because it would not fit one frame) and every
//! response APDU of the step. The agent sends Hello first with the range of
//! versions it speaks ([`proto::PROTOCOL_VERSION`] is 1); the service
//! answers Welcome with a version in that range, or Refuse. A later version
//! adds message types; a peer receiving a type it does not know disconnects.
//! Both sides ping every heartbeat interval and cut off a peer silent for
//! three intervals.
//!
//! # One round trip per tap
//!
//! The service keeps a fresh challenge ready for every connected reader
//! ([`challenge`]): 32 random bytes with a random 64-bit id, valid for a
//! limited time, single use. It sends the reader a *prepared tap*
//! (Prepare): SELECT PIV and GENERAL AUTHENTICATE with the card
//! authentication key (9E, ECDSA P-256) over SHA-256 of the challenge,
//! built by the PIV client itself so the bytes are exactly what the
//! mechanism will send. When a card arrives the agent runs the steps at
//! once and sends the answers with CardPresent. The service takes the
//! challenge out of its store (unknown, already used, expired or another
//! reader's: refused with [`hub::HubEvent::ChallengeRefused`], and the
//! prepared answers are discarded), hands the mechanism the challenge
//! through [`host::Transport::take_challenge`], and the tap's transport
//! answers those two commands from the prepared answers. A repeat tap on
//! the fast path therefore costs one network round trip. It issues the next
//! challenge at once.
//!
//! On the full path (the fast path missed, or the first tap of a card) the
//! mechanism then reads the certificate (and the CHUID): the transport
//! sends both reads with their GET RESPONSE chains as one Run, so a full
//! read costs two round trips; the GENERAL AUTHENTICATE answer already
//! obtained serves the full path too (same challenge). Any command the
//! transport has no answer for goes over the link as its own Run.
//!
//! # Faults
//!
//! A link that drops during a tap ends it on the service side with
//! [`host::TransportError::Link`] and on the agent with
//! [`agent::AgentEvent::TapLost`]; each card presence carries a number and
//! the service reports a presence once, even when the agent reconnects.
//! The agent reconnects with exponential backoff and jitter. The service
//! reports readers online and offline as events.
//!
//! # Cost per connection
//!
//! One immutable `Arc<ServerConfig>` serves every connection; sessions are
//! resumable (a server-side session cache); a connection's own state is
//! its TLS state, its reading and writing tasks with their small channels,
//! its one pending challenge and the tap it is running. Closing it frees
//! these and forgets its challenge through an index by reader, without a
//! pass over the other readers' state.
//!
//! It decides nothing and holds no access data: the service runs the mechanism and the decision; the reader holds no keys.

pub mod agent;
pub mod challenge;
pub mod hub;
pub mod offer;
pub mod proto;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
