//! The fault catalogs: every deliberate defect the server can exhibit, each a row naming its
//! flag value and the checker probes (or webhook checks) it makes fail. The payments API's
//! [`Fault`]s and the webhook consumer's [`WebhookFault`]s are two tables of one macro, so the
//! two cannot drift apart in what a fault is: a name, a doc comment that says what goes wrong,
//! and what it breaks.

use std::fmt;
use std::str::FromStr;

// `$d` is a `$` handed in by each invocation, so the `for_each_…!` macro it generates can have
// metavariables of its own.
macro_rules! fault_catalog {
    (
        $d:tt;
        $(#[$enum_doc:meta])*
        enum $catalog:ident, unknown $unknown:ident = $unknown_message:literal,
            for each $for_each:ident;
        $( $(#[$doc:meta])* $variant:ident = $name:literal => [$($broken:literal),* $(,)?]; )*
    ) => {
        $(#[$enum_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $catalog {
            $( $(#[$doc])* $variant, )*
        }

        impl $catalog {
            /// Every fault of the catalog, in its order.
            pub const ALL: &[$catalog] = &[$($catalog::$variant),*];

            /// The name its flag takes.
            pub fn name(self) -> &'static str {
                match self { $($catalog::$variant => $name,)* }
            }

            /// What this fault is designed to make fail, and only that (see the type's
            /// documentation for which probes or checks these are).
            pub fn breaks(self) -> &'static [&'static str] {
                match self { $($catalog::$variant => &[$($broken),*],)* }
            }
        }

        impl fmt::Display for $catalog {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        #[doc = concat!("A name that no [`", stringify!($catalog), "`] has.")]
        #[derive(Debug, thiserror::Error, PartialEq, Eq)]
        #[error($unknown_message)]
        pub struct $unknown {
            name: String,
            known: String,
        }

        impl FromStr for $catalog {
            type Err = $unknown;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $catalog::ALL
                    .iter()
                    .copied()
                    .find(|f| f.name() == s)
                    .ok_or_else(|| $unknown {
                        name: s.to_owned(),
                        known: $catalog::ALL
                            .iter()
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            }
        }

        #[doc = concat!(
            "`", stringify!($for_each), "!(m)` expands to `m! { Variant, … }` with every [`",
            stringify!($catalog), "`], in catalog order: test files generate one test per fault ",
            "from it, so a new fault gets its tests without anyone copying the list."
        )]
        #[macro_export]
        macro_rules! $for_each {
            ($d m:ident) => { $d m! { $($variant),* } };
        }
    };
}

fault_catalog! {
    $;
    /// One deliberate defect. Each variant makes the checker probe(s) returned by
    /// [`Fault::breaks`] fail, and only those: that is how the suite proves it can fail (first
    /// the probe whose required or critical check fails; recommended-only effects are WARN
    /// unless `--strict`). The kebab-case name is what `--fault` takes; the order is the
    /// checker's probe catalog's.
    enum Fault, unknown UnknownFault = "unknown fault {name:?}; known faults: {known}",
        for each for_each_fault;
    /// A request without `Idempotency-Key` executes instead of getting 400. Breaks `missing-key`.
    NoKeyRequired = "no-key-required" => ["missing-key"];
    /// Errors are `text/plain` without problem+json or `Link`. Breaks the recommended checks of
    /// `missing-key` and `payload-mismatch` (WARN, FAIL under `--strict`).
    PlainErrors = "plain-errors" => ["missing-key", "payload-mismatch"];
    /// Lookup and insert are not atomic: the record is read outside any transaction, then after
    /// `race_window_us` a claim is written unconditionally, so duplicates inside the window all
    /// execute. Breaks `concurrent-duplicates`.
    Race = "race" => ["concurrent-duplicates"];
    /// A duplicate that arrives while the original is processing gets 500 instead of 409.
    /// Breaks `concurrent-duplicates`, and every probe that retries while an original runs:
    /// `lost-response`, `loser-does-not-unlock`.
    Concurrent500 = "concurrent-500" => ["concurrent-duplicates", "lost-response", "loser-does-not-unlock"];
    /// 409 without `Retry-After`. Breaks the recommended check of `concurrent-duplicates`.
    NoRetryAfter = "no-retry-after" => ["concurrent-duplicates"];
    /// No heartbeat and no fencing: an owner held longer than the lease loses its claim to a
    /// duplicate, and both executions commit. Breaks `concurrent-duplicates`, which holds its
    /// original past the lease (`--hold-at-least`). Under a fixed hold longer than the lease,
    /// `loser-does-not-unlock` and `cross-replica` fail too; with a named hold they release it
    /// as soon as they have seen what they look for, before the lease runs out.
    ExpiringLock = "expiring-lock" => ["concurrent-duplicates"];
    /// The payload fingerprint is ignored: another payload with a used key gets the old replay.
    /// Breaks `payload-mismatch`.
    NoFingerprint = "no-fingerprint" => ["payload-mismatch"];
    /// The fingerprint is taken over the raw request bytes, not the normalised payload, so the
    /// same JSON sent with its keys in another order is a mismatch (422). Breaks
    /// `reserialized-retry`.
    ReserializedPayloadIsNew = "reserialized-payload-is-new" => ["reserialized-retry"];
    /// A fingerprint mismatch answers 409 instead of 422. Breaks `payload-mismatch`.
    Mismatch409 = "mismatch-409" => ["payload-mismatch"];
    /// The 422 replaces the stored record, so a later retry of the original no longer replays.
    /// Breaks `mismatch-no-poison`.
    MismatchOverwrite = "mismatch-overwrite" => ["mismatch-no-poison"];
    /// Replays are re-rendered with a new id and `createdAt` (no new payment row).
    /// Breaks `replay-identity`.
    ReplayNewId = "replay-new-id" => ["replay-identity"];
    /// A retry of a completed request executes again and creates a new payment.
    /// Breaks `replay-identity`, and every probe whose retries after completion count effects
    /// with a critical check: `concurrent-duplicates`, `mismatch-no-poison`,
    /// `reserialized-retry`, `lost-response`, `loser-does-not-unlock`, `restart-persistence`,
    /// `cross-replica`, `header-name-case`. (`quoted-key`,
    /// `escaped-key` and `key-parameters` fail too, but only as a consequence of
    /// `replay-identity`, so they are INCONCLUSIVE naming it.)
    ReplayReexecute = "replay-reexecute" => [
        "replay-identity",
        "concurrent-duplicates",
        "mismatch-no-poison",
        "reserialized-retry",
        "lost-response",
        "loser-does-not-unlock",
        "restart-persistence",
        "cross-replica",
        "header-name-case",
    ];
    /// The raw header text is the key (no RFC 8941 parsing): anything non-empty is accepted.
    /// Breaks `malformed-key`, `duplicate-header`, `empty-key` (`""` is two characters) and
    /// `oversized-key` (no length check), and the recommended checks of `bare-token`,
    /// `key-parameters`.
    QuotesLiteral = "quotes-literal" => [
        "bare-token",
        "malformed-key",
        "duplicate-header",
        "empty-key",
        "oversized-key",
        "key-parameters",
    ];
    /// Only bare tokens are accepted; the draft's quoted String gets 400. Breaks `quoted-key`;
    /// the checker's pre-flight then falls back to bare keys for everything else.
    RejectQuoted = "reject-quoted" => ["quoted-key"];
    /// The header is split on commas, so a String holding a comma gets 400. Breaks `escaped-key`.
    SplitOnComma = "split-on-comma" => ["escaped-key"];
    /// With two `Idempotency-Key` lines the first is used. Breaks `duplicate-header`.
    DuplicateHeaderFirst = "duplicate-header-first" => ["duplicate-header"];
    /// `""` is accepted as a key. Breaks `empty-key`.
    AcceptEmpty = "accept-empty" => ["empty-key"];
    /// Keys of any length are accepted and executed. Breaks `oversized-key`.
    NoKeyLimit = "no-key-limit" => ["oversized-key"];
    /// Parameters are part of the key, so `"k";v=1` and `"k"` are two keys. The key is the
    /// serialised Item, so `""` (two characters) passes the empty-key check too.
    /// Breaks `key-parameters` and `empty-key`.
    ParamsInKey = "params-in-key" => ["empty-key", "key-parameters"];
    /// The scope ignores the tenant: tenant B can replay tenant A's response.
    /// Breaks `tenant-isolation`.
    UnscopedKeys = "unscoped-keys" => ["tenant-isolation"];
    /// The scope ignores the operation: a payout key collides with a payment key.
    /// Breaks `cross-endpoint`.
    UnscopedOperation = "unscoped-operation" => ["cross-endpoint"];
    /// Records live in process memory: lost on restart and not shared between processes.
    /// Breaks `restart-persistence` and `cross-replica`.
    MemoryStore = "memory-store" => ["restart-persistence", "cross-replica"];
    /// A new key whose payload matches a completed record of the tenant gets that record's
    /// replay instead of executing. Breaks `distinct-keys-independent`.
    FingerprintDedupe = "fingerprint-dedupe" => ["distinct-keys-independent"];
    /// Keys are lowercased before lookup, though an sf-string is case-sensitive.
    /// Breaks `distinct-keys-independent`.
    CaseInsensitiveKeys = "case-insensitive-keys" => ["distinct-keys-independent"];
    /// The key is claimed before validation, and the 400 is stored and replayed for that key.
    /// Breaks `error-not-cached`.
    CacheValidationError = "cache-validation-error" => ["error-not-cached"];
    /// The payment is created and the request still answered with an error: a crashed
    /// execution (`X-Test-Crash`) fails after its payment committed and answers 500, and a key
    /// whose 400 was stored (as under `cache-validation-error`) executes the valid retry, then
    /// replays the 400. Breaks `error-not-cached` and `wedged-key-recovery`.
    ErrorAfterExecute = "error-after-execute" => ["error-not-cached", "wedged-key-recovery"];
    /// A failed execution leaves the key processing forever, whatever the lease says.
    /// Breaks `wedged-key-recovery`.
    WedgeOnCrash = "wedge-on-crash" => ["wedged-key-recovery"];
    /// A rejected duplicate releases the owner's claim, so the next duplicate executes.
    /// Breaks `loser-does-not-unlock`, and `concurrent-duplicates`, whose concurrent waves then
    /// execute more than once.
    LoserUnlocks = "loser-unlocks" => ["concurrent-duplicates", "loser-does-not-unlock"];
    /// A client that disconnects before its response is written makes the server delete the
    /// record although the payment committed, so the retry executes again.
    /// Breaks `lost-response`.
    ReleaseOnDisconnect = "release-on-disconnect" => ["lost-response"];
    /// A request carrying `Idempotency-Replayed: true` is answered 200 `{}` without executing
    /// or storing anything. Breaks `spoofed-marker-headers`.
    TrustReplayHeader = "trust-replay-header" => ["spoofed-marker-headers"];
    /// Every POST answers 500. Breaks `first-request` (and so every probe that needs it).
    RejectAll = "reject-all" => ["first-request"];
    /// Each replica keeps the claims it is processing in its own memory and trusts that
    /// alone: a key it is not processing itself is claimed by an unconditional write, and
    /// completed unfenced. One instance is correct (its memory sees every duplicate, and a
    /// processing record it does not know of can only be a crashed run's); two replicas on one
    /// store both execute a duplicate sent while the other runs it. Breaks `cross-replica`.
    LocalClaims = "local-claims" => ["cross-replica"];
    /// Expired keys are still replayed: completed records are looked up without the expiry the
    /// server publishes in `Idempotency-Key-Expires-At`, and none is purged. Breaks
    /// `key-expiry`.
    NoExpiry = "no-expiry" => ["key-expiry"];
    /// A GET carrying `Idempotency-Key` goes through an idempotency cache: the effect counter
    /// read again with the same key replays the first answer, however many payments were made
    /// since. Breaks `get-ignored` (recommended checks: WARN, FAIL under `--strict`).
    ReplayKeyedReads = "replay-keyed-reads" => ["get-ignored"];
    /// The key header is looked up under its two usual spellings only, `Idempotency-Key` and
    /// `idempotency-key`, as a case-sensitive map of raw header names would: `IDEMPOTENCY-KEY`
    /// counts as no key. Breaks `header-name-case`.
    KeyNameSpellings = "key-name-spellings" => ["header-name-case"];
    /// A keyed request that finds the store down waits for it to come back instead of being
    /// refused with 503, then claims its key and executes. Breaks `store-outage` (fails-fast).
    HangOnOutage = "hang-on-outage" => ["store-outage"];
    /// When the store cannot claim a key the request executes anyway, unprotected (fail open).
    /// Breaks `store-outage`.
    FailOpen = "fail-open" => ["store-outage"];
    /// The provider call carries no idempotency key. Breaks `prov-key-present`.
    ProvNoKey = "prov-no-key" => ["prov-key-present"];
    /// Every provider attempt carries a fresh UUIDv4 key, as a retry loop around an SDK call
    /// does: a lost provider answer and its retry are two charges, and so are an in-progress
    /// conflict and the call that waited it out.
    ProvNewKeyPerAttempt = "prov-new-key-per-attempt" => [
        "prov-same-key-on-provider-retry",
        "prov-lost-provider-response",
        "prov-in-progress-conflict",
    ];
    /// The provider key is a hash of the provider request (path and body): two orders with
    /// equal payloads become one charge, whether two keys of one tenant or one key of two
    /// tenants sent them. Breaks `prov-distinct-keys` and `prov-tenant-scope`.
    ProvKeyFromBody = "prov-key-from-body" => ["prov-distinct-keys", "prov-tenant-scope"];
    /// The client's key is forwarded as it was sent, without tenant or operation: tenant B's
    /// charge, or a payout, replays another's charge.
    ProvRawClientKey = "prov-raw-client-key" => ["prov-tenant-scope", "prov-operation-scope"];
    /// The provider is called after validation but before the client's key is claimed, so
    /// concurrent duplicates each call it. Breaks `prov-concurrent-duplicates`.
    ProvCallBeforeClaim = "prov-call-before-claim" => ["prov-concurrent-duplicates"];
    /// The provider key is random per client key and held in process memory: the request
    /// after a crash or restart gets another one. Breaks `prov-crash-after-call`.
    ProvKeyNotPersisted = "prov-key-not-persisted" => ["prov-crash-after-call"];
    /// An unknown provider outcome (every attempt failed without an answer) is answered 402
    /// `payment failed` and stored as the key's result. Breaks `prov-lost-provider-response`.
    ProvTimeoutIsFailure = "prov-timeout-is-failure" => ["prov-lost-provider-response"];
    /// The provider's in-progress conflict is a definitive refusal: 502 at once, no waiting.
    /// Breaks `prov-in-progress-conflict`.
    Prov409IsFailure = "prov-409-is-failure" => ["prov-in-progress-conflict"];
    /// A replay calls the provider again (same key) before answering from the local record,
    /// leaning on the provider's shorter retention.
    ProvReplayRecallsProvider = "prov-replay-recalls-provider" => [
        "prov-client-replay",
        "prov-provider-forgets",
    ];
    /// No heartbeat renews the claim during the provider call, and an owner that takes over a
    /// claim whose lease ran out calls the provider with a fresh key. Breaks
    /// `prov-lease-fencing`.
    ProvStaleOwnerNewKey = "prov-stale-owner-new-key" => ["prov-lease-fencing"];
    /// The answer (and the stored row) lacks `providerRef`. Breaks `prov-correlation`.
    ProvNoReference = "prov-no-reference" => ["prov-correlation"];
    /// The provider is called before the key and the body are validated (only an exact
    /// replay of a completed request is answered first), so refused requests charge — and,
    /// being before the claim too, concurrent duplicates each call.
    ProvCallBeforeValidate = "prov-call-before-validate" => [
        "prov-mismatch-no-call",
        "prov-refused-no-call",
        "prov-concurrent-duplicates",
    ];
}

impl Fault {
    /// Whether this fault is about the provider calls, which only exist with `provider_url`.
    pub fn needs_provider(self) -> bool {
        matches!(
            self,
            Fault::ProvNoKey
                | Fault::ProvNewKeyPerAttempt
                | Fault::ProvKeyFromBody
                | Fault::ProvRawClientKey
                | Fault::ProvCallBeforeClaim
                | Fault::ProvKeyNotPersisted
                | Fault::ProvTimeoutIsFailure
                | Fault::Prov409IsFailure
                | Fault::ProvReplayRecallsProvider
                | Fault::ProvStaleOwnerNewKey
                | Fault::ProvNoReference
                | Fault::ProvCallBeforeValidate
        )
    }
}

fault_catalog! {
    $;
    /// One deliberate defect of the webhook consumer (`crate::webhooks`). Each variant makes
    /// the `idem-check webhook` checks [`WebhookFault::breaks`] lists fail against the
    /// `standard` scheme, under `--strict` (`breaks_for` says it for each scheme), and only
    /// those. The kebab-case name is what `--webhook-fault` takes. A list of its own rather than
    /// more [`Fault`]s: the payments fault matrix runs `idem-check run` once per `Fault`, and
    /// these break nothing there.
    enum WebhookFault,
        unknown UnknownWebhookFault = "unknown webhook fault {name:?}; known: {known}",
        for each for_each_webhook_fault;
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
    FourXxOnDuplicate = "4xx-on-duplicate" => ["wh-redelivery", "wh-lost-ack", "wh-late-redelivery"];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_round_trip_and_each_breaks_a_probe() {
        for fault in Fault::ALL {
            assert_eq!(fault.to_string().parse::<Fault>(), Ok(*fault));
            assert!(!fault.breaks().is_empty(), "{fault} breaks nothing");
        }
        assert!("no-such-fault".parse::<Fault>().is_err());
    }

    /// The provider faults are the `prov-` rows, and each breaks only `prov-` probes: the list
    /// in [`Fault::needs_provider`] cannot miss a new one.
    #[test]
    fn provider_faults_are_the_prov_rows() {
        for fault in Fault::ALL {
            let prov = fault.name().starts_with("prov-");
            assert_eq!(fault.needs_provider(), prov, "{fault}");
            assert!(
                fault
                    .breaks()
                    .iter()
                    .all(|p| p.starts_with("prov-") == prov),
                "{fault} breaks probes of the other side"
            );
        }
    }
}
