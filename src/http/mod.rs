//! Everything that talks to the target.
//!
//! [`client`] sends ordinary requests (HTTP/1.1 or HTTP/2 over reqwest) and records each one as
//! an [`exchange::Exchange`] of a [`Request`], telling connections closed while idle by what
//! [`kept`] knows; [`raw`] writes exact bytes for the key-syntax
//! probes and for dropping a connection on purpose, framed by [`h1`]; [`burst`] releases
//! synchronised duplicates for the race probes, over HTTP/1.1 connections (the final bytes
//! written by [`release`]'s two threads, scheduled by [`sched`]) or, with [`h2burst`], in one
//! HTTP/2 packet; [`pool`] keeps HTTP/1.1 connections alive between the requests and bursts of a
//! stress run; [`curl`] turns a recorded request into a command line a user can rerun;
//! [`throttle`] says what a rate limiter's 429 means for a request.
//!
//! Every engine opens its connections through the run's [`connection::Connector`], built once
//! from the run's settings: [`tls`] (trust, client certificate) and [`net`] (proxy, fixed
//! addresses).

pub mod burst;
pub mod client;
pub mod connection;
pub mod curl;
mod error;
pub mod exchange;
pub mod h1;
pub mod h2burst;
mod kept;
pub mod net;
pub mod pool;
pub mod raw;
pub mod release;
mod request;
pub mod role;
pub mod sched;
#[cfg(test)]
mod scripted;
pub mod throttle;
pub mod tls;

pub use connection::Connector;
pub use error::{ErrorKind, HttpError, Phase};
pub use request::Request;
