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
    ID_POINTER: "--id-pointer" "id-pointer";
    HOLD_HEADER: "--hold-header" "hold-header";
    HOLD_RELEASE: "--hold-release" "hold-release";
    HOLD_AT_LEAST: "--hold-at-least" "hold-at-least";
    KEY_TTL_HEADER: "--key-ttl-header" "key-ttl-header";
    QUIET_WINDOW: "--quiet-window" "quiet-window";
    INVALID_BODY: "--invalid-body" "invalid-body";
    SECOND_URL: "--second-url" "second-url";
    REPLICA: "--replica" "replicas";
    HTTP2: "--http2" "http2";
    READ_URL: "--read-url" "read-url";
    KEY_TTL: "--key-ttl" "key-ttl";
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
    COUNT_URL: "--count-url" in ["counter"] "url";
    COUNT_POINTER: "--count-pointer" in ["counter"] "pointer";
    COUNT_CMD: "--count-cmd" in ["counter"] "command";
    TENANT_B_HEADER: "--tenant-b-header" in ["tenant-b"] "headers";
    RESTART_CMD: "--restart-cmd" in ["restart"] "command";
    READY_URL: "--ready-url" in ["restart"] "ready-url";
    RESTART_TIMEOUT: "--restart-timeout" in ["restart"] "timeout";
    CRASH_HEADER: "--crash-header" in ["crash"] "header";
    LEASE_WAIT: "--lease-wait" in ["crash"] "lease-wait";
    STORE_DOWN_CMD: "--store-down-cmd" in ["store-outage"] "down-command";
    STORE_UP_CMD: "--store-up-cmd" in ["store-outage"] "up-command";
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
