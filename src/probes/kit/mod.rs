//! The probe kit: the parts [`super::ProbeCtx`] is a front over, each on its own, so a new
//! probe or transport plugs into one of them and each is tested without a socket. Holding a
//! request in flight works through a `ProbeCtx`, so it sits above the kit
//! ([`super::hold`]).
//!
//! | part | holds |
//! |---|---|
//! | [`recorder`] | the one numbering and store of a probe's exchanges, its timeline, what is unfinished |
//! | [`transport`] | the ways of sending (ordinary, exact bytes, drop unread, burst) behind one trait |
//! | [`send`] | sending and recording as one step, and the answer streak that stops a run |
//! | [`resending`] | the 429 rule, a wrapper every transport gets, and the transports under it |
//! | [`meter`] | counter readings, settling before them, executions counted between them |
//! | [`judge`] | check settings, which failures stand and which are unjudged |
//! | [`requests`] | the operation with this probe's payloads and keys |
//! | [`session`] | what the run carries from probe to probe |
//! | [`relation`] | the one key factory: the keys a probe needs, in the relation it states, in the learnt shape |
//! | [`shape`] | the keys the API accepts: the pre-flight's trials, keys derived in that shape |

#[cfg(test)]
pub(crate) mod fake;
pub mod judge;
pub mod meter;
pub mod recorder;
pub mod relation;
pub mod requests;
pub mod resending;
pub mod send;
pub mod session;
pub mod shape;
pub mod transport;
