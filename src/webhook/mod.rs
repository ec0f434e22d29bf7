//! `idem-check webhook`: plays the sender of a webhook consumer. It signs each delivery as the
//! scheme's real senders do ([`scheme`]), makes events from the body template ([`event`]),
//! sends and records them ([`sender`]), reads the effect meter only once the consumer has
//! settled ([`counts`]), and judges each check ([`checks`]) into the report model `run` uses
//! ([`run`]), so every report format, exit code and `--probe` selection work the same; its
//! reproduce lines sign in the shell ([`resign`]).

pub mod checks;
pub mod counts;
pub mod event;
pub mod resign;
pub mod run;
pub mod scheme;
pub mod sender;
