//! The fake provider's ledger: every call that reached it (what was asked, with which key, how
//! it was answered, which probe's token it holds) and every charge it committed. It is the
//! meter of the `downstream` probes: a charge is a row here, counted once the calls settled.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;

use super::profile::{Operation, Params};
use crate::http::exchange::{Header, Outcome, ReceivedResponse, SentRequest};
use crate::http::{HttpError, Phase};

/// How the fake answered a call, once it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// Still being worked on (held, or waiting for a key in flight).
    Pending,
    /// An HTTP answer.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// The connection closed without an answer; `committed` when the charge was made first.
    Closed { why: &'static str },
}

/// One call that reached the fake.
#[derive(Debug, Clone)]
pub struct Call {
    /// 1-based, in arrival order over the whole run.
    pub n: usize,
    pub at: Instant,
    pub finished: Option<Instant>,
    pub method: String,
    pub path: String,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
    /// The key as read from the profile's carrier (unquoted), `None` without one.
    pub key: Option<String>,
    /// What the carrier held when it was not a valid key (an RFC 8941 String that does not
    /// parse).
    pub key_problem: Option<String>,
    /// `None` for a path the profile does not know (answered 404).
    pub operation: Option<Operation>,
    pub params: Option<Params>,
    /// The probe token the call holds ([`super::attribution`]), `None` when it holds none.
    pub token: Option<String>,
    /// What the script did to it (`held`, `503`, …), for the evidence.
    pub scripted: Option<String>,
    pub answered: Answered,
    /// The charge this call committed.
    pub committed: Option<usize>,
}

impl Call {
    /// The call as a request sent to the fake at `base` (its URL), for the evidence.
    pub fn request(&self, base: &str) -> SentRequest {
        SentRequest {
            method: self.method.clone(),
            url: format!("{base}{}", self.path),
            headers: self.headers.clone(),
            body: self.body.clone(),
        }
    }

    /// How the fake answered, as the evidence shows an outcome.
    pub fn outcome(&self) -> Outcome {
        match &self.answered {
            Answered::Status {
                status,
                headers,
                body,
            } => Ok(ReceivedResponse {
                status: *status,
                version: http::Version::HTTP_11,
                headers: headers
                    .iter()
                    .map(|(k, v)| Header::new(k, v.as_bytes()))
                    .collect(),
                body: body.clone(),
                body_truncated: false,
                problem: None,
            }),
            // Closed on purpose by idem-check's own fake: what came of it is known, so checks
            // citing it are judged (a failure in transport would leave them unjudged).
            Answered::Closed { why } => Err(HttpError::ClosedByFake(why.to_string())),
            // Still held when counted: the API's call had no answer yet, which leaves the
            // checks citing it unjudged, as any unanswered request does.
            Answered::Pending => Err(HttpError::Timeout {
                phase: Phase::FirstByte,
                after: self.at.elapsed(),
            }),
        }
    }

    /// A key that is present and parses.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    pub fn finished(&self) -> bool {
        self.answered != Answered::Pending
    }
}

/// A charge (or payout) the fake committed.
#[derive(Debug, Clone)]
pub struct Charge {
    /// 1-based.
    pub n: usize,
    /// The provider's id (`pi_…`).
    pub id: String,
    pub key: Option<String>,
    /// The account that was charged (the caller's credential, masked), one per credential.
    pub account: String,
    pub operation: Operation,
    pub params: Params,
    /// The call that committed it.
    pub call: usize,
    pub token: Option<String>,
}

/// What a key did at the fake: still in flight, or done with the answer a repeat gets.
#[derive(Debug, Clone)]
pub enum KeyState {
    InFlight {
        operation: Operation,
        params: Value,
    },
    Done {
        operation: Operation,
        params: Value,
        status: u16,
        body: Vec<u8>,
        charge: Option<usize>,
    },
}

/// The calls, the charges, and the keys the provider remembers.
#[derive(Debug, Default)]
pub struct Ledger {
    pub calls: Vec<Call>,
    pub charges: Vec<Charge>,
    /// Per (account, key).
    pub keys: HashMap<(String, String), KeyState>,
}

impl Ledger {
    /// The calls holding `token`.
    pub fn calls_of(&self, token: &str) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|c| c.token.as_deref() == Some(token))
            .cloned()
            .collect()
    }

    /// The charges made by calls holding `token`.
    pub fn charges_of(&self, token: &str) -> Vec<Charge> {
        self.charges
            .iter()
            .filter(|c| c.token.as_deref() == Some(token))
            .cloned()
            .collect()
    }

    /// The calls since `since` that hold no known token: no probe can be charged with them.
    pub fn unattributed_since(&self, since: Instant) -> Vec<Call> {
        self.calls
            .iter()
            .filter(|c| c.at >= since && c.token.is_none())
            .cloned()
            .collect()
    }

    /// Call `n`: calls are numbered by their place in the ledger, from 1.
    pub fn call(&self, n: usize) -> Option<&Call> {
        self.calls.get(n.checked_sub(1)?)
    }

    pub fn call_mut(&mut self, n: usize) -> Option<&mut Call> {
        self.calls.get_mut(n.checked_sub(1)?)
    }

    /// Commits a charge for call `n` and returns its number.
    pub fn commit(
        &mut self,
        n: usize,
        id: String,
        account: String,
        operation: Operation,
        params: Params,
    ) -> usize {
        let charge = self.charges.len() + 1;
        let (key, token) = match self.call(n) {
            Some(c) => (c.key.clone(), c.token.clone()),
            None => (None, None),
        };
        self.charges.push(Charge {
            n: charge,
            id,
            key,
            account,
            operation,
            params,
            call: n,
            token,
        });
        if let Some(c) = self.call_mut(n) {
            c.committed = Some(charge);
        }
        charge
    }
}
