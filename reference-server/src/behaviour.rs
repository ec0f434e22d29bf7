//! What the request path does at each decision, derived once from the configured fault.
//!
//! The correct server is [`Behaviour::correct`]; each fault changes one or two fields of it. The
//! request path reads these fields, never the fault, so the algorithm reads as the algorithm and
//! the list of ways to get it wrong is this one file.

use std::time::Duration;

use axum::http::StatusCode;

use crate::config::Fault;
use crate::problem::ErrorStyle;
use crate::provider::{CallPoint, Decisions, KeySource};
use crate::store::TakeOver;

/// How a key is claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimMode {
    /// One atomic claim in the store (the contract).
    Atomic,
    /// Read outside any transaction, then after this window write the claim unconditionally
    /// (the `race` fault).
    ReadThenWrite(Duration),
    /// Trust a per-process set of in-flight keys, then write the claim unconditionally (the
    /// `local-claims` fault).
    LocalClaims,
}

/// Every decision of the request path that a fault can change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Behaviour {
    /// How errors are rendered.
    pub(crate) style: ErrorStyle,
    /// The key parser's variant (`None` = RFC 8941 as the draft says).
    pub(crate) key_parser: Option<Fault>,
    /// Every POST is refused with 500.
    pub(crate) reject_all: bool,
    /// A request claiming to be a replay is answered 200 `{}` unexecuted.
    pub(crate) trust_replay_header: bool,
    /// A request without a key is refused (else it executes unprotected).
    pub(crate) require_key: bool,
    /// An invalid payload claims its key and stores its 400 for replay.
    pub(crate) store_validation_errors: bool,
    /// The tenant is part of the scope.
    pub(crate) scope_tenant: bool,
    /// The operation is part of the scope.
    pub(crate) scope_operation: bool,
    /// A new key whose payload completed under another key of the scope's tenant and operation
    /// replays that response (the `fingerprint-dedupe` fault).
    pub(crate) dedupe_by_payload: bool,
    /// How the claim is taken.
    pub(crate) claim: ClaimMode,
    /// Which records an atomic claim may replace.
    pub(crate) take_over: TakeOver,
    /// Completions are fenced by the owner token.
    pub(crate) fenced: bool,
    /// The owner renews its lease while it works.
    pub(crate) heartbeat: bool,
    /// A failed execution releases its claim.
    pub(crate) release_failed: bool,
    /// A crashed execution, and a replay of a stored error, create the payment anyway.
    pub(crate) execute_behind_errors: bool,
    /// A payload other than the stored one is refused.
    pub(crate) check_fingerprint: bool,
    /// The fingerprint covers the raw request bytes instead of the normalised payload.
    pub(crate) fingerprint_raw_bytes: bool,
    /// A stored 400 replays whatever the payload.
    pub(crate) replay_stored_errors: bool,
    /// The status of a fingerprint mismatch.
    pub(crate) mismatch_status: StatusCode,
    /// A mismatch replaces the stored record with its own 422.
    pub(crate) overwrite_on_mismatch: bool,
    /// A duplicate while the owner runs is answered 500 instead of 409.
    pub(crate) in_progress_500: bool,
    /// 409s carry `Retry-After`.
    pub(crate) retry_after: bool,
    /// A refused duplicate deletes the owner's claim.
    pub(crate) loser_unlocks: bool,
    /// Replays are re-rendered with a new id.
    pub(crate) replay_new_id: bool,
    /// A client that hangs up makes the server forget the committed record.
    pub(crate) forget_on_disconnect: bool,
    /// Completed records are cached in memory for replays, and duplicates of a claim this
    /// process is making or executing are answered from memory (see `claims`): safe only
    /// because the correct server never modifies a record behind a valid claim, which faults do.
    pub(crate) answers_from_memory: bool,
    /// Expired completed records are still replayed, and none is purged.
    pub(crate) replay_expired: bool,
    /// A GET with a key replays the first answer given for that key.
    pub(crate) replay_keyed_reads: bool,
    /// The key header is only found under the spellings `Idempotency-Key` and
    /// `idempotency-key` (see [`crate::key_names`]).
    pub(crate) key_name_spellings: bool,
    /// A request whose key cannot be claimed (the store is down) executes unprotected.
    pub(crate) fail_open: bool,
    /// A keyed request waits out a store outage instead of being refused.
    pub(crate) wait_out_outage: bool,
    /// How the payment provider is called (with `--provider-url`).
    pub(crate) provider: Decisions,
}

impl Behaviour {
    /// The contract, as the README describes it.
    pub(crate) fn correct() -> Self {
        Self {
            style: ErrorStyle::ProblemJson,
            key_parser: None,
            reject_all: false,
            trust_replay_header: false,
            require_key: true,
            store_validation_errors: false,
            scope_tenant: true,
            scope_operation: true,
            dedupe_by_payload: false,
            claim: ClaimMode::Atomic,
            take_over: TakeOver::CORRECT,
            fenced: true,
            heartbeat: true,
            release_failed: true,
            execute_behind_errors: false,
            check_fingerprint: true,
            fingerprint_raw_bytes: false,
            replay_stored_errors: false,
            mismatch_status: StatusCode::UNPROCESSABLE_ENTITY,
            overwrite_on_mismatch: false,
            in_progress_500: false,
            retry_after: true,
            loser_unlocks: false,
            replay_new_id: false,
            forget_on_disconnect: false,
            answers_from_memory: true,
            replay_expired: false,
            replay_keyed_reads: false,
            key_name_spellings: false,
            fail_open: false,
            wait_out_outage: false,
            provider: Decisions::CORRECT,
        }
    }

    /// The behaviour with `fault` (if any); `race_window` is the `race` fault's gap.
    pub(crate) fn new(fault: Option<Fault>, race_window: Duration) -> Self {
        let correct = Self::correct();
        let Some(fault) = fault else {
            return correct;
        };
        let b = Self {
            answers_from_memory: false,
            ..correct
        };
        match fault {
            Fault::NoKeyRequired => Self {
                require_key: false,
                ..b
            },
            Fault::PlainErrors => Self {
                style: ErrorStyle::PlainText,
                ..b
            },
            Fault::Race => Self {
                claim: ClaimMode::ReadThenWrite(race_window),
                fenced: false,
                ..b
            },
            Fault::Concurrent500 => Self {
                in_progress_500: true,
                ..b
            },
            Fault::NoRetryAfter => Self {
                retry_after: false,
                ..b
            },
            Fault::ExpiringLock => Self {
                heartbeat: false,
                fenced: false,
                ..b
            },
            Fault::NoFingerprint => Self {
                check_fingerprint: false,
                ..b
            },
            Fault::ReserializedPayloadIsNew => Self {
                fingerprint_raw_bytes: true,
                ..b
            },
            Fault::Mismatch409 => Self {
                mismatch_status: StatusCode::CONFLICT,
                ..b
            },
            Fault::MismatchOverwrite => Self {
                overwrite_on_mismatch: true,
                ..b
            },
            Fault::ReplayNewId => Self {
                replay_new_id: true,
                ..b
            },
            Fault::ReplayReexecute => Self {
                take_over: TakeOver {
                    completed: true,
                    ..TakeOver::CORRECT
                },
                ..b
            },
            Fault::QuotesLiteral
            | Fault::RejectQuoted
            | Fault::SplitOnComma
            | Fault::DuplicateHeaderFirst
            | Fault::AcceptEmpty
            | Fault::NoKeyLimit
            | Fault::ParamsInKey
            | Fault::CaseInsensitiveKeys => Self {
                key_parser: Some(fault),
                ..b
            },
            Fault::UnscopedKeys => Self {
                scope_tenant: false,
                ..b
            },
            Fault::UnscopedOperation => Self {
                scope_operation: false,
                ..b
            },
            // The store keeps its records in process memory; the request path is unchanged.
            Fault::MemoryStore => b,
            Fault::FingerprintDedupe => Self {
                dedupe_by_payload: true,
                ..b
            },
            Fault::CacheValidationError => Self {
                store_validation_errors: true,
                replay_stored_errors: true,
                ..b
            },
            Fault::ErrorAfterExecute => Self {
                store_validation_errors: true,
                replay_stored_errors: true,
                execute_behind_errors: true,
                ..b
            },
            Fault::WedgeOnCrash => Self {
                release_failed: false,
                take_over: TakeOver {
                    expired_leases: false,
                    ..TakeOver::CORRECT
                },
                ..b
            },
            Fault::LoserUnlocks => Self {
                loser_unlocks: true,
                ..b
            },
            Fault::ReleaseOnDisconnect => Self {
                forget_on_disconnect: true,
                ..b
            },
            Fault::TrustReplayHeader => Self {
                trust_replay_header: true,
                ..b
            },
            Fault::RejectAll => Self {
                reject_all: true,
                ..b
            },
            Fault::LocalClaims => Self {
                claim: ClaimMode::LocalClaims,
                fenced: false,
                ..b
            },
            Fault::NoExpiry => Self {
                replay_expired: true,
                ..b
            },
            Fault::ReplayKeyedReads => Self {
                replay_keyed_reads: true,
                ..b
            },
            Fault::KeyNameSpellings => Self {
                key_name_spellings: true,
                ..b
            },
            Fault::HangOnOutage => Self {
                wait_out_outage: true,
                ..b
            },
            Fault::FailOpen => Self {
                fail_open: true,
                ..b
            },
            Fault::ProvNoKey
            | Fault::ProvNewKeyPerAttempt
            | Fault::ProvKeyFromBody
            | Fault::ProvRawClientKey
            | Fault::ProvKeyNotPersisted => Self {
                provider: Decisions {
                    key: match fault {
                        Fault::ProvNoKey => KeySource::Omitted,
                        Fault::ProvNewKeyPerAttempt => KeySource::PerAttempt,
                        Fault::ProvKeyFromBody => KeySource::BodyHash,
                        Fault::ProvRawClientKey => KeySource::ClientKey,
                        _ => KeySource::ProcessMemory,
                    },
                    ..Decisions::CORRECT
                },
                ..b
            },
            Fault::ProvCallBeforeClaim | Fault::ProvCallBeforeValidate => Self {
                provider: Decisions {
                    call_point: if fault == Fault::ProvCallBeforeClaim {
                        CallPoint::BeforeClaim
                    } else {
                        CallPoint::BeforeValidation
                    },
                    ..Decisions::CORRECT
                },
                ..b
            },
            Fault::ProvTimeoutIsFailure => Self {
                provider: Decisions {
                    unknown_is_failure: true,
                    ..Decisions::CORRECT
                },
                ..b
            },
            Fault::Prov409IsFailure => Self {
                provider: Decisions {
                    in_progress_is_failure: true,
                    ..Decisions::CORRECT
                },
                ..b
            },
            Fault::ProvReplayRecallsProvider => Self {
                provider: Decisions {
                    replay_recalls: true,
                    ..Decisions::CORRECT
                },
                ..b
            },
            // The claim is left to expire while the provider holds the call (no heartbeat; the
            // completion stays fenced), and whoever takes it over draws a new key.
            Fault::ProvStaleOwnerNewKey => Self {
                heartbeat: false,
                provider: Decisions {
                    fresh_key_on_takeover: true,
                    ..Decisions::CORRECT
                },
                ..b
            },
            Fault::ProvNoReference => Self {
                provider: Decisions {
                    reference_in_answer: false,
                    ..Decisions::CORRECT
                },
                ..b
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fault changes something besides the replay cache, except `memory-store`, which
    /// lives in the store.
    #[test]
    fn every_fault_changes_the_behaviour() {
        let uncached = Behaviour {
            answers_from_memory: false,
            ..Behaviour::correct()
        };
        for &fault in Fault::ALL {
            let b = Behaviour::new(Some(fault), Duration::ZERO);
            assert_eq!(
                b == uncached,
                fault == Fault::MemoryStore,
                "{fault} leaves the request path unchanged"
            );
        }
        assert_eq!(Behaviour::new(None, Duration::ZERO), Behaviour::correct());
    }
}
