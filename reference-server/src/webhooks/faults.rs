//! The webhook consumer's deliberate defects as decisions: [`Consumer`] turns the configured
//! [`WebhookFault`] (declared with the server's other settings, in `crate::config`) into what
//! the handler reads, so the handler reads as the correct consumer; and which checks a fault
//! breaks under each scheme.

use super::schemes::Scheme;
use super::verify::Rules;
use crate::config::WebhookFault;

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
