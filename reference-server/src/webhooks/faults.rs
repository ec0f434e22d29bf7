//! The webhook consumer's deliberate defects, declared once: each names the `idem-check
//! webhook` checks it makes fail, and [`Consumer`] turns the configured one into the decisions
//! the handler reads, so the handler reads as the correct consumer.
//!
//! A list of its own rather than more [`crate::Fault`]s: the payments fault matrix runs
//! `idem-check run` once per `Fault`, and these break nothing there.

use std::fmt;
use std::str::FromStr;

use super::schemes::Scheme;
use super::verify::Rules;

// `$d` is a `$` handed in by the invocation, so the `for_each_webhook_fault!` this generates
// can have metavariables of its own.
macro_rules! webhook_faults {
    ($d:tt; $( $(#[$doc:meta])* $variant:ident = $name:literal => [$($check:literal),* $(,)?]; )*) => {
        /// One deliberate defect of the webhook consumer. Each variant makes the checks
        /// [`WebhookFault::breaks`] lists fail, and only those. The kebab-case name is what
        /// `--webhook-fault` takes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum WebhookFault {
            $( $(#[$doc])* $variant, )*
        }

        impl WebhookFault {
            /// Every webhook fault.
            pub const ALL: &[WebhookFault] = &[$(WebhookFault::$variant),*];

            /// The `--webhook-fault` name.
            pub fn name(self) -> &'static str {
                match self { $(WebhookFault::$variant => $name,)* }
            }

            /// The checks this fault makes fail against the `standard` scheme, under `--strict`
            /// (see [`WebhookFault::breaks_for`] for the others).
            pub fn breaks(self) -> &'static [&'static str] {
                match self { $(WebhookFault::$variant => &[$($check),*],)* }
            }
        }

        /// `for_each_webhook_fault!(m)` expands to `m! { Variant, … }` with every
        /// [`WebhookFault`], so test files generate one test per fault.
        #[macro_export]
        macro_rules! for_each_webhook_fault {
            ($d m:ident) => { $d m! { $($variant),* } };
        }
    };
}

webhook_faults! {
    $;
    /// Processed ids live in this process's memory only: forgotten on restart, unknown to a
    /// replica.
    DedupeInMemory = "dedupe-in-memory" => ["wh-late-redelivery", "wh-cross-replica"];
    /// A processed id is forgotten `webhook_dedupe_ttl` after it was applied, while senders
    /// retry for days.
    DedupeTtl = "dedupe-ttl" => ["wh-late-redelivery"];
    /// The id is recorded as seen before the signature is checked, so a forgery carrying a
    /// real event's id suppresses the real event. Before verification the source is unknown,
    /// so the record is not per source either: `wh-source-isolation` fails too.
    DedupeBeforeVerify = "dedupe-before-verify" => ["wh-forgery-no-poison", "wh-source-isolation"];
    /// The id is committed as processed before the work: a delivery that fails afterwards
    /// leaves it, and the sender's retry is skipped as a duplicate (the event is lost).
    SeenIsProcessed = "seen-is-processed" => ["wh-retry-after-failure"];
    /// The body is parsed and re-encoded before verifying, so a signature over bytes that are
    /// not in serde_json's compact form fails.
    ReserializeBody = "reserialize-body" => ["wh-raw-body"];
    /// The signed timestamp is not checked at all.
    NoTimestampCheck = "no-timestamp-check" => ["wh-stale-timestamp", "wh-future-timestamp"];
    /// Only the age of the signed timestamp is checked; any future timestamp passes.
    AgeOnlyTimestamp = "age-only-timestamp" => ["wh-future-timestamp"];
    /// Events are deduplicated on a hash of the body: two events with identical bodies are one.
    BodyHashDedupe = "body-hash-dedupe" => ["wh-distinct-events"];
    /// Events are deduplicated on the signature header: every re-signed redelivery is new.
    /// Without a signed timestamp (GitHub, Shopify) the signature depends on the body alone,
    /// and this is `body-hash-dedupe`.
    SignatureDedupe = "signature-dedupe" => [
        "wh-redelivery",
        "wh-concurrent-duplicates",
        "wh-lost-ack",
        "wh-late-redelivery",
        "wh-cross-replica",
    ];
    /// Only the first of several signatures is compared (a rotated secret's second fails).
    FirstSignatureOnly = "first-signature-only" => ["wh-rotated-secret"];
    /// The work runs synchronously and takes `webhook_slow_handler` before the answer.
    SlowSyncHandler = "slow-sync-handler" => ["wh-ack-latency"];
    /// A known event id answers 409, which makes the sender retry it.
    FourXxOnDuplicate = "4xx-on-duplicate" => ["wh-redelivery", "wh-lost-ack"];
    /// Every valid delivery applies its effect.
    NoDedupe = "no-dedupe" => [
        "wh-redelivery",
        "wh-byte-replay",
        "wh-concurrent-duplicates",
        "wh-lost-ack",
        "wh-late-redelivery",
        "wh-cross-replica",
    ];
    /// A delivery without any signature header is accepted.
    AcceptUnsigned = "accept-unsigned" => ["wh-bad-signature"];
    /// An event type the consumer does not handle answers 400.
    UnknownType400 = "unknown-type-400" => ["wh-unknown-type"];
    /// The dedupe key ignores the source: one source's event id suppresses another's.
    GlobalDedupe = "global-dedupe" => ["wh-source-isolation"];
    /// The effect commits first and the id is recorded only once the answer is on its way: a
    /// connection dropped before the answer leaves the effect without its record.
    RecordAfterAck = "record-after-ack" => ["wh-lost-ack"];
    /// Each process decides from its own set of ids (loaded from the store at start); the store
    /// is written but never read again, so a replica's ids are unknown.
    LocalDedupe = "local-dedupe" => ["wh-cross-replica"];
}

impl WebhookFault {
    /// The checks this fault makes fail against `scheme`: those of [`WebhookFault::breaks`]
    /// that `scheme` can run at all (no timestamp checks without a signed timestamp, no
    /// rotation with a single signature, no identical bodies when the id is in the body).
    pub fn breaks_for(self, scheme: Scheme) -> Vec<&'static str> {
        let breaks = if self == WebhookFault::SignatureDedupe && !scheme.signs_timestamp() {
            WebhookFault::BodyHashDedupe.breaks()
        } else {
            self.breaks()
        };
        breaks
            .iter()
            .copied()
            .filter(|check| match *check {
                "wh-stale-timestamp" | "wh-future-timestamp" => scheme.signs_timestamp(),
                "wh-rotated-secret" => scheme.signs_several(),
                "wh-distinct-events" => !scheme.id_in_body(),
                _ => true,
            })
            .collect()
    }
}

impl fmt::Display for WebhookFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown `--webhook-fault` name.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown webhook fault {name:?}; known: {known}")]
pub struct UnknownWebhookFault {
    name: String,
    known: String,
}

impl FromStr for WebhookFault {
    type Err = UnknownWebhookFault;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WebhookFault::ALL
            .iter()
            .copied()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownWebhookFault {
                name: s.to_owned(),
                known: WebhookFault::ALL
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// What the dedupe key is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyedBy {
    /// The event id (the contract).
    EventId,
    /// A SHA-256 of the body.
    BodyHash,
    /// The signature header.
    Signature,
}

/// Where processed ids are looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Memory {
    /// The store, in the transaction of the effect (the contract).
    Store,
    /// This process's memory, empty at start.
    Process,
    /// This process's memory, loaded from the store at start; the store is written too.
    ProcessLoaded,
    /// Nowhere: every delivery applies.
    Nowhere,
}

/// When the id is recorded relative to the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recording {
    /// Claimed before the work, committed with the effect, rolled back on failure.
    WithEffect,
    /// Committed as processed before the signature is checked (rolled back on failure).
    BeforeVerify,
    /// Committed as processed before the work, kept on failure.
    BeforeWork,
    /// Committed after the work, by the request that answers: lost with its connection.
    AfterAnswer,
}

/// Every decision of the consumer that a fault can change; [`Consumer::CORRECT`] is the
/// contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Consumer {
    pub(crate) rules: Rules,
    pub(crate) raw_body: bool,
    pub(crate) keyed_by: KeyedBy,
    pub(crate) per_source: bool,
    pub(crate) memory: Memory,
    pub(crate) recording: Recording,
    /// Processed ids are forgotten after the configured dedupe TTL.
    pub(crate) forgets: bool,
    /// Sleep the configured slow-handler time before the effect.
    pub(crate) slow: bool,
    /// A known id answers 409 instead of 200.
    pub(crate) duplicate_409: bool,
    /// An unknown type answers 400 instead of 200.
    pub(crate) unknown_400: bool,
}

impl Consumer {
    pub(crate) const CORRECT: Consumer = Consumer {
        rules: Rules::CORRECT,
        raw_body: true,
        keyed_by: KeyedBy::EventId,
        per_source: true,
        memory: Memory::Store,
        recording: Recording::WithEffect,
        forgets: false,
        slow: false,
        duplicate_409: false,
        unknown_400: false,
    };

    /// The consumer `fault` makes of the correct one.
    pub(crate) fn new(fault: Option<WebhookFault>) -> Self {
        let c = Consumer::CORRECT;
        let Some(fault) = fault else { return c };
        let rules = c.rules;
        match fault {
            WebhookFault::DedupeInMemory => Consumer {
                memory: Memory::Process,
                ..c
            },
            WebhookFault::DedupeTtl => Consumer { forgets: true, ..c },
            WebhookFault::DedupeBeforeVerify => Consumer {
                recording: Recording::BeforeVerify,
                ..c
            },
            WebhookFault::SeenIsProcessed => Consumer {
                recording: Recording::BeforeWork,
                ..c
            },
            WebhookFault::ReserializeBody => Consumer {
                raw_body: false,
                ..c
            },
            WebhookFault::NoTimestampCheck => Consumer {
                rules: Rules {
                    past: false,
                    future: false,
                    ..rules
                },
                ..c
            },
            WebhookFault::AgeOnlyTimestamp => Consumer {
                rules: Rules {
                    future: false,
                    ..rules
                },
                ..c
            },
            WebhookFault::BodyHashDedupe => Consumer {
                keyed_by: KeyedBy::BodyHash,
                ..c
            },
            WebhookFault::SignatureDedupe => Consumer {
                keyed_by: KeyedBy::Signature,
                ..c
            },
            WebhookFault::FirstSignatureOnly => Consumer {
                rules: Rules {
                    every_signature: false,
                    ..rules
                },
                ..c
            },
            WebhookFault::SlowSyncHandler => Consumer { slow: true, ..c },
            WebhookFault::FourXxOnDuplicate => Consumer {
                duplicate_409: true,
                ..c
            },
            WebhookFault::NoDedupe => Consumer {
                memory: Memory::Nowhere,
                ..c
            },
            WebhookFault::AcceptUnsigned => Consumer {
                rules: Rules {
                    signature_required: false,
                    ..rules
                },
                ..c
            },
            WebhookFault::UnknownType400 => Consumer {
                unknown_400: true,
                ..c
            },
            WebhookFault::GlobalDedupe => Consumer {
                per_source: false,
                ..c
            },
            WebhookFault::RecordAfterAck => Consumer {
                recording: Recording::AfterAnswer,
                ..c
            },
            WebhookFault::LocalDedupe => Consumer {
                memory: Memory::ProcessLoaded,
                ..c
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_each_fault_changes_the_consumer_and_breaks_a_check() {
        for fault in WebhookFault::ALL {
            assert_eq!(fault.name().parse::<WebhookFault>(), Ok(*fault));
            assert!(!fault.breaks().is_empty(), "{fault} breaks nothing");
            assert_ne!(Consumer::new(Some(*fault)), Consumer::CORRECT, "{fault}");
        }
        assert!("no-such-fault".parse::<WebhookFault>().is_err());
        assert_eq!(
            WebhookFault::SignatureDedupe.breaks_for(Scheme::Github),
            ["wh-distinct-events"]
        );
        assert!(WebhookFault::NoTimestampCheck
            .breaks_for(Scheme::Shopify)
            .is_empty());
    }
}
