//! HTTP/1.1 framing, byte for byte: a request record and its exact wire image ([`request`]),
//! and reading one response off a connection ([`response`]).
//!
//! Ordinary clients (reqwest, hyper) validate and normalise headers: they refuse control bytes,
//! merge or reorder fields, and pick the framing themselves. The key-syntax probes need the
//! opposite, and the evidence must show what was really sent, so the request is written exactly
//! as recorded and the response is read leniently enough that a refusal echoing a bad byte still
//! counts as an answer.

mod request;
mod response;

pub(crate) use request::{host_value, parse_url, request_target, wire_to};
pub use request::{prepare, to_wire};
pub use response::read_response_from;
pub(crate) use response::{asks_to_close, read_keeping, read_response};
