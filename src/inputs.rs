//! Every input that describes a target, declared once: the flag that gives it, where a target
//! file writes it (its table and key), and what the help says about it. The target-file reader
//! records each value's origin under the declared flag, the config's errors name it, the
//! misplaced-key hint lists the declared keys, and a probe's missing precondition names its
//! flag or key from here, so none of them can spell an input differently from another.
//!
//! A leaf module: it names nothing else in the crate, so every layer can read it.

/// One input of a target description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    /// How errors and hints name it on the command line (`--hold-header`, `-H`).
    pub flag: &'static str,
    /// The target file's table that holds the key (`restart`), `None` for the top level.
    pub table: Option<&'static str>,
    /// The target file's key inside that table (`command`).
    pub key: &'static str,
    /// What the input says, one line (the flag's help where the CLI takes it from here).
    pub help: &'static str,
}

impl Input {
    /// The flag as clap spells it: `hold-header` for `--hold-header`.
    pub fn long(&self) -> &'static str {
        self.flag.trim_start_matches('-')
    }

    /// The key as a target file's errors name it: `hold-header`, `[restart] command`.
    pub fn file_key(&self) -> String {
        match self.table {
            None => self.key.to_string(),
            Some(table) => format!("[{table}] {}", self.key),
        }
    }
}

/// Declares each input as a constant and lists them all in [`ALL`], so the list cannot miss one.
macro_rules! inputs {
    ($( $(#[$doc:meta])* $name:ident: $flag:literal $(in [$table:literal])? $key:literal $(, $help:literal)?; )*) => {
        $(
            $(#[$doc])*
            pub const $name: Input = Input {
                flag: $flag,
                table: inputs!(@table $($table)?),
                key: $key,
                help: inputs!(@help $($help)?),
            };
        )*
        /// Every declared input, in declaration order.
        pub const ALL: &[Input] = &[$($name),*];
    };
    (@table) => { None };
    (@table $table:literal) => { Some($table) };
    (@help) => { "" };
    (@help $help:literal) => { $help };
}

inputs! {
    /// The operation's URL, the one positional argument.
    URL: "the target URL" "url";
    METHOD: "-X" "method";
    HEADERS: "-H" "headers";
    BODY: "-d" "body";
    /// A body read from a file relative to the target file; the flag is `-d @FILE`.
    BODY_FILE: "-d" "body-file";
    ID_POINTER: "--id-pointer" "id-pointer",
        "JSON pointer to the created resource's id in a 2xx body, e.g. /id";
    HOLD_HEADER: "--hold-header" "hold-header",
        "A header that makes the server hold a request in flight, added to the original of the \
         concurrency probes, e.g. 'X-Test-Delay-Ms: 600', or 'X-Test-Hold: {{hold}}' with \
         --hold-release, on the reference server";
    HOLD_RELEASE: "--hold-release" "hold-release",
        "A URL that ends a hold early when POSTed, with {{hold}} where the hold's name goes; \
         the --hold-header value then carries {{hold}} too, so each held request gets its own \
         name. The probes release it once they have sent what they need while it was in flight";
    HOLD_AT_LEAST: "--hold-at-least" "hold-at-least",
        "With --hold-release: concurrent-duplicates still holds its original at least this \
         long, so a lock that expires while the original runs is seen; make it longer than the \
         target's lease [default: 0s]";
    KEY_TTL_HEADER: "--key-ttl-header" "key-ttl-header",
        "A header that asks the server for a short lifetime of the key it is sent with, added \
         to key-expiry's original so the probe need not wait out the deployment's lifetime, \
         e.g. 'X-Test-Key-Ttl-Ms: 200' on the reference server";
    QUIET_WINDOW: "--quiet-window" "quiet-window",
        "After a request the probe left unfinished (dropped, held, unanswered), how long the \
         effect counter must stay unchanged before the probe counts, so a late execution is \
         charged to the probe that caused it; lengthen it for APIs that execute asynchronously \
         [default: 300ms]";
    INVALID_BODY: "--invalid-body" "invalid-body",
        "A request body the operation must refuse, or @FILE (error-not-cached). Placeholders \
         work as in -d. Without it, one is derived from a JSON object body by giving its first \
         field a value of the wrong type";
    SECOND_URL: "--second-url" "second-url",
        "URL of a second operation that takes the same method and payload, e.g. .../payouts \
         (cross-endpoint: the same key there must be an independent request)";
    REPLICA: "--replica" "replicas",
        "The operation's URL on another replica of the same deployment (repeatable; \
         cross-replica: duplicates spread over the replicas must execute once; stress sends \
         each key's duplicates round-robin to the target and the replicas)";
    HTTP2: "--http2" "http2",
        "The target speaks HTTP/2 (for http:// URLs, h2c with prior knowledge): race bursts \
         then release every duplicate in one packet. https:// targets that pick h2 in ALPN get \
         that without the flag";
    READ_URL: "--read-url" "read-url",
        "URL of the API's read operation, e.g. .../payments/count: sent as a GET with and \
         without a key, which must make no difference (get-ignored)";
    KEY_TTL: "--key-ttl" "key-ttl",
        "How long a completed key is remembered, for APIs that do not send \
         Idempotency-Key-Expires-At (key-expiry waits it out; at most 150s)";
    KEY_HEADER: "--key-header" "key-header";
    KEY_IN_BODY: "--key-in-body" "key-in-body",
        "The request carries its idempotency key in the body instead of a header: at this JSON \
         pointer (/idempotency_key), or for a form body in this field; the -d body must hold \
         it. Only `client` sends body keys yet";
    KEY_SYNTAX: "--key-syntax" "key-syntax",
        "How the key is written: ietf (an RFC 8941 String, the draft's field) or token (an \
         opaque value under the provider's own rules) [default: ietf for a header named \
         Idempotency-Key, token for every other carrier]";
    KEY_SHAPE: "--key-shape" "key-shape",
        "The keys the API accepts: uuid, token ([A-Za-z0-9_-]), or any, each optionally with \
         a longest length, e.g. token:64 or any:255 [default: any]";
    PROXY: "--proxy" "proxy";
    RESOLVE: "--resolve" "resolve";
    CACERT: "--cacert" in ["tls"] "cacert";
    CERT: "--cert" in ["tls"] "cert";
    CERT_KEY: "--key" in ["tls"] "key";
    INSECURE: "--insecure" in ["tls"] "insecure";
    COUNT_URL: "--count-url" in ["counter"] "url",
        "URL of an effect counter read before and after each probe (GET, JSON body)";
    COUNT_POINTER: "--count-pointer" in ["counter"] "pointer",
        "JSON pointer to the count in the counter's body [default: /count]";
    COUNT_CMD: "--count-cmd" in ["counter"] "command",
        "A shell command that prints the effect count (instead of --count-url)";
    TENANT_B_HEADER: "--tenant-b-header" in ["tenant-b"] "headers",
        "A header that makes requests come from a second tenant (repeatable); replaces tenant \
         A's header of the same name. Needed by tenant-isolation";
    RESTART_CMD: "--restart-cmd" in ["restart"] "command",
        "A shell command that restarts the target (restart-persistence)";
    READY_URL: "--ready-url" in ["restart"] "ready-url",
        "Polled after --restart-cmd until it answers 2xx";
    RESTART_TIMEOUT: "--restart-timeout" in ["restart"] "timeout",
        "How long the restart may take [default: 30s]";
    CRASH_HEADER: "--crash-header" in ["crash"] "header",
        "A header that makes the server fail after it claimed the key, as a crash would, e.g. \
         'X-Test-Crash: 1' on the reference server (wedged-key-recovery)";
    LEASE_WAIT: "--lease-wait" in ["crash"] "lease-wait",
        "How long retries after a crash may keep getting 409 before the key counts as wedged; \
         make it longer than the target's lease [default: 60s]";
    STORE_DOWN_CMD: "--store-down-cmd" in ["store-outage"] "down-command",
        "A shell command that takes the idempotency store down (store-outage; with \
         --store-up-cmd, bounded by --restart-timeout)";
    STORE_UP_CMD: "--store-up-cmd" in ["store-outage"] "up-command",
        "A shell command that brings the idempotency store back after --store-down-cmd";
}

/// For a target-file key written in the wrong place, where it belongs: "at the top level,
/// before the first [table]" or "in the [restart] table" (several when tables share the key).
pub fn homes_of(key: &str) -> Vec<String> {
    let mut homes: Vec<String> = Vec::new();
    for input in ALL.iter().filter(|i| i.key == key) {
        let home = match input.table {
            None => "at the top level, before the first [table]".to_string(),
            Some(t) => format!("in the [{t}] table"),
        };
        if !homes.contains(&home) {
            homes.push(home);
        }
    }
    homes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each file key and each flag names one input, except where one flag stands for two
    /// spellings of the same value (`-d` for body and body-file).
    #[test]
    fn every_key_is_declared_once() {
        for (i, a) in ALL.iter().enumerate() {
            for b in &ALL[i + 1..] {
                assert!(
                    (a.table, a.key) != (b.table, b.key),
                    "{} twice",
                    a.file_key()
                );
                assert!(a.flag != b.flag || a.flag == "-d", "{} twice", a.flag);
            }
        }
    }

    #[test]
    fn keys_are_found_in_their_tables() {
        assert_eq!(homes_of("ready-url"), vec!["in the [restart] table"]);
        assert_eq!(
            homes_of("read-url"),
            vec!["at the top level, before the first [table]"]
        );
        assert_eq!(
            homes_of("down-command"),
            vec!["in the [store-outage] table"]
        );
        assert_eq!(homes_of("url").len(), 2);
        assert_eq!(CERT_KEY.long(), "key");
        assert_eq!(STORE_UP_CMD.file_key(), "[store-outage] up-command");
    }
}
