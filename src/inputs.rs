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
    /// `--reference` applies it too (to the bundled server's own description) instead of
    /// refusing it.
    pub with_reference: bool,
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

/// The table of inputs, handed to `$callback`: `with_inputs!(callback)` expands to
/// `callback! { { extra } by_hand { … } plain { … } }`, `extra` being what the caller passed in
/// braces after the callback's name. Each part of the crate that must know every input (the
/// constants below, [`TargetSpec`](crate::target::TargetSpec)'s fields and its masking
/// `Debug`, the target file's top-level keys, the flags and how they are laid over the file)
/// generates its code from these rows, so a new input is one row here and the code that reads
/// its value.
///
/// `by_hand` rows are inputs whose flag or key has rules of its own (a positional URL, `-d`
/// with `body-file`, the connection flags shared with `discover`), written out where they are
/// read. `plain` rows give, in the order `run -h` lists them:
/// - the flag, where the target file writes it (`top` for the top level, `["table"]` for a
///   table, whose struct is written in `target.rs`) and its key;
/// - the field of [`TargetSpec`](crate::target::TargetSpec) and of the flags, and its type:
///   `Option<String>`, `Option<Duration>`, `Vec<String>` (a repeatable flag, a list in the
///   file) or `bool` (a switch);
/// - how `Debug` shows it: `plain`, or masked as `text` (secrets replaced wherever they
///   stand), `url` (credentials and secret parameters) or `header` (`Name: value`, the value
///   masked when the name says it is a credential);
/// - the flag's value name, whether it also applies to `--reference` (else that refuses it),
///   and its help.
#[macro_export]
macro_rules! with_inputs {
    ($callback:ident $({ $($extra:tt)* })?) => {
        $callback! {
            { $($($extra)*)? }
            by_hand {
                /// The operation's URL, the one positional argument.
                URL: "the target URL" top "url";
                METHOD: "-X" top "method";
                HEADERS: "-H" top "headers";
                BODY: "-d" top "body";
                /// A body read from a file relative to the target file; the flag is `-d @FILE`.
                BODY_FILE: "-d" top "body-file";
                KEY_HEADER: "--key-header" top "key-header";
                PROXY: "--proxy" top "proxy";
                RESOLVE: "--resolve" top "resolve";
                CACERT: "--cacert" ["tls"] "cacert";
                CERT: "--cert" ["tls"] "cert";
                CERT_KEY: "--key" ["tls"] "key";
                INSECURE: "--insecure" ["tls"] "insecure";
                /// `webhook`'s body of the event `wh-unknown-type` sends, for a consumer that reads
                /// the type from the body rather than a header: a flag only (read and checked as
                /// JSON at start, in `commands/webhook.rs`), which no target file holds.
                UNKNOWN_EVENT: "--unknown-event" top "";
            }
            plain {
                ID_POINTER: "--id-pointer" top "id-pointer" => id_pointer: Option<String>,
                    shown plain, value "POINTER", reference false,
                    help "JSON pointer to the created resource's id in a 2xx body, e.g. /id";
                COUNT_URL: "--count-url" ["counter"] "url" => count_url: Option<String>,
                    shown url, value "URL", reference false,
                    help "URL of an effect counter read before and after each probe (GET, JSON body)";
                COUNT_POINTER: "--count-pointer" ["counter"] "pointer" => count_pointer: Option<String>,
                    shown plain, value "POINTER", reference false,
                    help "JSON pointer to the count in the counter's body [default: /count]";
                COUNT_CMD: "--count-cmd" ["counter"] "command" => count_cmd: Option<String>,
                    shown text, value "CMD", reference false,
                    help "A shell command that prints the effect count (instead of --count-url)";
                TENANT_B_HEADER: "--tenant-b-header" ["tenant-b"] "headers" => tenant_b_headers: Vec<String>,
                    shown header, value "'Name: value'", reference false,
                    help "A header that makes requests come from a second tenant (repeatable); \
                          replaces tenant A's header of the same name. Needed by tenant-isolation";
                AUTH_CMD: "--auth-cmd" top "auth-command" => auth_cmd: Option<String>,
                    shown text, value "CMD", reference false,
                    help "A shell command that prints tenant A's credential as a header line, e.g. \
                          'Authorization: Bearer …', for tokens that expire: run before the \
                          probes and again whenever the API answers 401 (the request is then sent \
                          once more with the new credential; at most 30s each), its header \
                          replaces a -H of the same name and every value it prints is masked in \
                          every report";
                HOLD_HEADER: "--hold-header" top "hold-header" => hold_header: Option<String>,
                    shown header, value "'Name: value'", reference false,
                    help "A header that makes the server hold a request in flight, added to the \
                          original of the concurrency probes, e.g. 'X-Test-Delay-Ms: 600', or \
                          'X-Test-Hold: {{hold}}' with --hold-release, on the reference server";
                HOLD_RELEASE: "--hold-release" top "hold-release" => hold_release: Option<String>,
                    shown url, value "URL", reference false,
                    help "A URL that ends a hold early when POSTed, with {{hold}} where the hold's \
                          name goes; the --hold-header value then carries {{hold}} too, so each \
                          held request gets its own name. The probes release it once they have \
                          sent what they need while it was in flight";
                HOLD_AT_LEAST: "--hold-at-least" top "hold-at-least" => hold_at_least: Option<Duration>,
                    shown plain, value "DURATION", reference false,
                    help "With --hold-release: concurrent-duplicates still holds its original at \
                          least this long, so a lock that expires while the original runs is seen; \
                          make it longer than the target's lease [default: 0s]";
                RESTART_CMD: "--restart-cmd" ["restart"] "command" => restart_cmd: Option<String>,
                    shown text, value "CMD", reference false,
                    help "A shell command that restarts the target (restart-persistence)";
                CRASH_CMD: "--crash-cmd" ["restart"] "crash-command" => crash_cmd: Option<String>,
                    shown text, value "CMD", reference false,
                    help "A shell command that kills the target at once, as a crash would, e.g. \
                          'kill -9 $(cat api.pid)': prov-crash-after-call runs it while the fake \
                          provider holds the API's call, lets the call commit, then brings the \
                          target back with --restart-cmd (which it needs)";
                READY_URL: "--ready-url" ["restart"] "ready-url" => ready_url: Option<String>,
                    shown url, value "URL", reference false,
                    help "Polled after --restart-cmd until it answers 2xx";
                RESTART_TIMEOUT: "--restart-timeout" ["restart"] "timeout" => restart_timeout: Option<Duration>,
                    shown plain, value "DURATION", reference false,
                    help "How long the restart may take [default: 30s]";
                INVALID_BODY: "--invalid-body" top "invalid-body" => invalid_body: Option<String>,
                    shown text, value "BODY|@FILE", reference false,
                    help "A request body the operation must refuse, or @FILE (error-not-cached). \
                          Placeholders work as in -d. Without it, one is derived from a JSON \
                          object body by giving its first field a value of the wrong type";
                SECOND_URL: "--second-url" top "second-url" => second_url: Option<String>,
                    shown url, value "URL", reference false,
                    help "URL of a second operation that takes the same method and payload, e.g. \
                          .../payouts (cross-endpoint: the same key there must be an independent \
                          request)";
                REPLICA: "--replica" top "replicas" => replicas: Vec<String>,
                    shown url, value "URL", reference false,
                    help "The operation's URL on another replica of the same deployment \
                          (repeatable; cross-replica: duplicates spread over the replicas must \
                          execute once; stress sends each key's duplicates round-robin to the \
                          target and the replicas)";
                CRASH_HEADER: "--crash-header" ["crash"] "header" => crash_header: Option<String>,
                    shown header, value "'Name: value'", reference false,
                    help "A header that makes the server fail after it claimed the key, as a \
                          crash would, e.g. 'X-Test-Crash: 1' on the reference server \
                          (wedged-key-recovery)";
                LEASE_WAIT: "--lease-wait" ["crash"] "lease-wait" => lease_wait: Option<Duration>,
                    shown plain, value "DURATION", reference false,
                    help "How long retries after a crash may keep getting 409 before the key \
                          counts as wedged; make it longer than the target's lease [default: 60s]";
                READ_URL: "--read-url" top "read-url" => read_url: Option<String>,
                    shown url, value "URL", reference false,
                    help "URL of the API's read operation, e.g. .../payments/count: sent as a GET \
                          with and without a key, which must make no difference (get-ignored)";
                KEY_TTL: "--key-ttl" top "key-ttl" => key_ttl: Option<Duration>,
                    shown plain, value "DURATION", reference false,
                    help "How long a completed key is remembered, for APIs that do not send \
                          Idempotency-Key-Expires-At (key-expiry waits it out; at most 150s)";
                KEY_TTL_HEADER: "--key-ttl-header" top "key-ttl-header" => key_ttl_header: Option<String>,
                    shown header, value "'Name: value'", reference false,
                    help "A header that asks the server for a short lifetime of the key it is \
                          sent with, added to key-expiry's original so the probe need not wait out \
                          the deployment's lifetime, e.g. 'X-Test-Key-Ttl-Ms: 200' on the \
                          reference server";
                KEY_IN_BODY: "--key-in-body" top "key-in-body" => key_in_body: Option<String>,
                    shown plain, value "POINTER", reference true,
                    help "The request carries its idempotency key in the body instead of a \
                          header: at this JSON pointer (/idempotency_key), or for a form body in \
                          this field; a JSON body without the member gets it in its parent object, which must \
                          exist. Its syntax is token";
                KEY_SYNTAX: "--key-syntax" top "key-syntax" => key_syntax: Option<String>,
                    shown plain, value "SYNTAX", reference true,
                    help "How the key is written: ietf (an RFC 8941 String, the draft's field) or \
                          token (an opaque value under the provider's own rules) [default: ietf \
                          for Idempotency-Key, a suite's header and --reference; token for \
                          --key-header and --key-in-body]";
                KEY_SHAPE: "--key-shape" top "key-shape" => key_shape: Option<String>,
                    shown plain, value "SHAPE", reference true,
                    help "The keys the API accepts: uuid, token ([A-Za-z0-9_-]), or any, each \
                          optionally with a longest length, e.g. token:64 or any:255 [default: any]";
                KEY_REQUIRED: "--key-required" top "key-required" => key_required: bool,
                    shown plain, value "", reference true,
                    help "The API requires the key: a request without one that executes FAILs \
                          missing-key. Without it, a provider's key (--key-header, --key-in-body) \
                          that a keyless request executes without is taken as optional";
                QUIET_WINDOW: "--quiet-window" top "quiet-window" => quiet_window: Option<Duration>,
                    shown plain, value "DURATION", reference false,
                    help "After a request the probe left unfinished (dropped, held, unanswered), \
                          how long the effect counter must stay unchanged before the probe counts, \
                          so a late execution is charged to the probe that caused it; lengthen it \
                          for APIs that execute asynchronously [default: 300ms]";
                STORE_DOWN_CMD: "--store-down-cmd" ["store-outage"] "down-command" => store_down_cmd: Option<String>,
                    shown text, value "CMD", reference false,
                    help "A shell command that takes the idempotency store down (store-outage; \
                          with --store-up-cmd, bounded by --restart-timeout)";
                STORE_UP_CMD: "--store-up-cmd" ["store-outage"] "up-command" => store_up_cmd: Option<String>,
                    shown text, value "CMD", reference false,
                    help "A shell command that brings the idempotency store back after \
                          --store-down-cmd";
                PROVIDER_LISTEN: "--provider-listen" ["provider"] "listen" => provider_listen: Option<String>,
                    shown plain, value "ADDR", reference false,
                    help "Starts a fake payment provider listening here, e.g. 127.0.0.1:4010, for the \
                          downstream probes: point the API under test at it (its SDK's base URL) \
                          and they judge the keys and charges that reach it";
                PROVIDER: "--provider" ["provider"] "profile" => provider: Option<String>,
                    shown plain, value "PROFILE", reference true,
                    help "The provider the fake plays: stripe, adyen, square, paypal, checkout, \
                          gocardless or generic [default: generic]; with --reference the bundled \
                          server calls it";
                PROVIDER_KEY_HEADER: "--provider-key-header" ["provider"] "key-header" => provider_key_header: Option<String>,
                    shown plain, value "NAME", reference false,
                    help "The header the API puts its provider key in, when not the profile's";
                PROVIDER_KEY_IN_BODY: "--provider-key-in-body" ["provider"] "key-in-body" => provider_key_in_body: Option<String>,
                    shown plain, value "POINTER", reference false,
                    help "The JSON pointer of the provider key in the provider request's body, when \
                          the API sends it there instead of the profile's carrier";
                PROVIDER_REF_POINTER: "--provider-ref-pointer" ["provider"] "ref-pointer" => provider_ref_pointer: Option<String>,
                    shown plain, value "POINTER", reference false,
                    help "JSON pointer to the provider's reference in the API's 2xx answer \
                          [default: /providerRef]";
                PROVIDER_CORRELATE: "--provider-correlate" ["provider"] "correlate" => provider_correlate: Option<String>,
                    shown plain, value "POINTER", reference false,
                    help "Where the client request's {{unique}} value (or the API's resource id) \
                          sits in the provider request, when it is not found anywhere in it";
                PROVIDER_TLS: "--provider-tls" ["provider"] "tls" => provider_tls: Option<String>,
                    shown plain, value "CA_FILE", reference true,
                    help "The fake provider serves HTTPS with a CA made at start, whose certificate \
                          (PEM) it writes to CA_FILE for the API under test to trust (e.g. \
                          SSL_CERT_FILE, NODE_EXTRA_CA_CERTS, REQUESTS_CA_BUNDLE); its server \
                          certificate covers 127.0.0.1, localhost and the --provider-listen \
                          host. With --reference the bundled server trusts it";
                HTTP2: "--http2" top "http2" => http2: bool,
                    shown plain, value "", reference true,
                    help "The target speaks HTTP/2 (for http:// URLs, h2c with prior knowledge): \
                          race bursts then release every duplicate in one packet. https:// targets \
                          that pick h2 in ALPN get that without the flag";
            }
        }
    };
}

/// Declares each input as a constant and lists them all in [`ALL`], so the list cannot miss one.
macro_rules! declare {
    (
        {}
        by_hand { $( $(#[$hdoc:meta])* $hname:ident: $hflag:literal $hhome:tt $hkey:literal; )* }
        plain { $(
            $(#[$doc:meta])*
            $name:ident: $flag:literal $home:tt $key:literal => $field:ident: $ty:ident $(<$inner:ident>)?,
                shown $shown:ident, value $value:literal, reference $reference:literal, help $help:literal;
        )* }
    ) => {
        $(
            $(#[$hdoc])*
            pub const $hname: Input = Input {
                flag: $hflag,
                table: declare!(@table $hhome),
                key: $hkey,
                help: "",
                with_reference: false,
            };
        )*
        $(
            $(#[$doc])*
            pub const $name: Input = Input {
                flag: $flag,
                table: declare!(@table $home),
                key: $key,
                help: $help,
                with_reference: $reference,
            };
        )*
        /// Every declared input, in declaration order.
        pub const ALL: &[Input] = &[$($hname,)* $($name),*];
    };
    (@table top) => { None };
    (@table [$table:literal]) => { Some($table) };
}

with_inputs!(declare);

/// For a target-file key written in the wrong place, where it belongs: "at the top level,
/// before the first \[table\]" or "in the \[restart\] table" (several when tables share the key).
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
