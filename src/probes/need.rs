//! What a probe needs from the target description, declared once per need: which inputs provide
//! it (their flags and target-file keys come from [`crate::inputs`]), and how the validated
//! config holds it. A probe lists its [`Need`]s in [`super::ProbeMeta::needs`], the runner SKIPs
//! it when one is missing, and the probe receives the value typed with
//! [`super::ProbeCtx::need`] (`ctx.need::<SecondTenant>()`): whether a need is provided and what
//! the probe gets are the same function of the config, so they cannot disagree.

use crate::config::Config;
use crate::inputs::{self, Input};

/// Something a probe needs from the target description; without it the probe SKIPs and names
/// the option that provides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// A second identity (`--tenant-b-header`).
    SecondTenant,
    /// A restart hook (`--restart-cmd` + `--ready-url`).
    RestartHook,
    /// A way to hold the original in flight (`--hold-header`).
    HoldHeader,
    /// A payload the operation refuses (`--invalid-body`, or a JSON object body to derive one).
    InvalidBody,
    /// A way to make the server fail after it claimed a key (`--crash-header`).
    CrashHook,
    /// A second operation taking the same payload (`--second-url`).
    SecondOperation,
    /// Another replica of the target (`--replica`).
    Replica,
    /// The API's read operation (`--read-url`).
    ReadOperation,
    /// A way to take the idempotency store down and back (`--store-down-cmd`, `--store-up-cmd`).
    StoreOutageHook,
    /// A key written as the draft's RFC 8941 String (`--key-syntax ietf`, the default for the
    /// `Idempotency-Key` header): the probes that test that syntax.
    IetfSyntax,
    /// A key carried in a header (`--key-header`, not `--key-in-body`): the probes that test
    /// header lines themselves.
    KeyHeader,
    /// The fake provider the API under test calls (`--provider-listen`).
    Provider,
}

/// How one need is provided: the input to give, the one that usually goes with it, and what
/// else provides it.
struct Provided {
    what: &'static str,
    input: Input,
    with: Option<Input>,
    or: Option<&'static str>,
}

impl Need {
    fn provided(self) -> Provided {
        let p = |what, input, with| Provided {
            what,
            input,
            with,
            or: None,
        };
        match self {
            Need::SecondTenant => p("a second tenant", inputs::TENANT_B_HEADER, None),
            Need::RestartHook => p(
                "a restart hook",
                inputs::RESTART_CMD,
                Some(inputs::READY_URL),
            ),
            Need::HoldHeader => p(
                "a way to hold the original request in flight",
                inputs::HOLD_HEADER,
                None,
            ),
            Need::InvalidBody => Provided {
                or: Some("a JSON object body to derive one from"),
                ..p(
                    "a payload the operation refuses",
                    inputs::INVALID_BODY,
                    None,
                )
            },
            Need::CrashHook => p(
                "a way to make the server fail after it claimed the key",
                inputs::CRASH_HEADER,
                Some(inputs::LEASE_WAIT),
            ),
            Need::SecondOperation => p("a second operation", inputs::SECOND_URL, None),
            Need::Replica => p("another replica of the target", inputs::REPLICA, None),
            Need::ReadOperation => p("the API's read operation", inputs::READ_URL, None),
            Need::StoreOutageHook => p(
                "a way to take the idempotency store down",
                inputs::STORE_DOWN_CMD,
                Some(inputs::STORE_UP_CMD),
            ),
            Need::IetfSyntax => p(
                "a key in the draft's RFC 8941 syntax",
                inputs::KEY_SYNTAX,
                None,
            ),
            Need::KeyHeader => p("a key carried in a header", inputs::KEY_HEADER, None),
            Need::Provider => p(
                "the fake provider the API calls",
                inputs::PROVIDER_LISTEN,
                Some(inputs::PROVIDER),
            ),
        }
    }

    /// The option to pass, as shown in SKIP reasons and `idem-check list`
    /// ("--restart-cmd (with --ready-url)").
    pub fn option(self) -> String {
        let p = self.provided();
        Self::spell(p.input.flag, p.with.map(|w| w.flag), p.or)
    }

    /// The target-file key that provides this (see fixtures/targets/README.md): "\[restart\]
    /// command (with ready-url)".
    pub fn target_key(self) -> String {
        let p = self.provided();
        Self::spell(&p.input.file_key(), p.with.map(|w| w.key), p.or)
    }

    fn spell(main: &str, with: Option<&str>, or: Option<&str>) -> String {
        match (with, or) {
            (Some(with), _) => format!("{main} (with {with})"),
            (None, Some(or)) => format!("{main} (or {or})"),
            (None, None) => main.to_string(),
        }
    }

    /// Whether the target description provides this.
    pub fn provided_by(self, config: &Config) -> bool {
        match self {
            Need::SecondTenant => typed::SecondTenant::value(config).is_some(),
            Need::RestartHook => typed::RestartHook::value(config).is_some(),
            Need::HoldHeader => typed::HoldHeader::value(config).is_some(),
            Need::InvalidBody => typed::InvalidBody::value(config).is_some(),
            Need::CrashHook => typed::CrashHook::value(config).is_some(),
            Need::SecondOperation => typed::SecondOperation::value(config).is_some(),
            Need::Replica => typed::Replica::value(config).is_some(),
            Need::ReadOperation => typed::ReadOperation::value(config).is_some(),
            Need::StoreOutageHook => typed::StoreOutageHook::value(config).is_some(),
            Need::IetfSyntax => typed::IetfSyntax::value(config).is_some(),
            Need::KeyHeader => typed::KeyHeader::value(config).is_some(),
            Need::Provider => typed::Provider::value(config).is_some(),
        }
    }

    /// Why a probe about the key's carrier does not apply to this run's key, when the need is
    /// one: adding an input would be wrong advice there (a provider's token must not be quoted,
    /// a body key has no header lines), so the SKIP names the carrier instead.
    pub fn not_this_key(self, config: &Config) -> Option<String> {
        let carrier = &config.key_carrier;
        let tests = match self {
            Need::IetfSyntax => {
                "the draft's RFC 8941 String (--key-syntax ietf if the API parses one)"
            }
            Need::KeyHeader => "a key header",
            _ => return None,
        };
        Some(format!("the key is {carrier}: this probe tests {tests}"))
    }

    /// What is missing, as a noun phrase ("a second tenant").
    pub fn what(self) -> &'static str {
        self.provided().what
    }
}

/// A need as a type: what a probe receives when it asks for it with
/// [`super::ProbeCtx::need`].
pub trait Precondition {
    /// The need the probe declares in [`super::ProbeMeta::needs`].
    const NEED: Need;
    /// What the probe gets.
    type Value;
    /// The value, when the config provides it; [`Need::provided_by`] is this being `Some`.
    fn value(config: &Config) -> Option<Self::Value>;
}

/// Declares each need's type, named like its [`Need`] variant, and how the config holds it.
macro_rules! preconditions {
    ($( $(#[$doc:meta])* $name:ident -> $value:ty = |$c:ident| $from:expr; )*) => {
        /// The needs as types, for [`super::ProbeCtx::need`].
        pub mod typed {
            use super::{Config, Need, Precondition};
            $(
                $(#[$doc])*
                pub struct $name;
                impl Precondition for $name {
                    const NEED: Need = Need::$name;
                    type Value = $value;
                    fn value($c: &Config) -> Option<$value> {
                        $from
                    }
                }
            )*
        }
    };
}

preconditions! {
    /// Tenant B's header lines.
    SecondTenant -> Vec<crate::http::exchange::Header> = |c| c.tenant_b.clone();
    /// The hook that restarts the target.
    RestartHook -> std::sync::Arc<dyn crate::config::RestartHook> = |c| c.restart.clone();
    /// The header that holds a request in flight.
    HoldHeader -> crate::http::exchange::Header = |c| c.hold_header.clone();
    /// A payload the operation must refuse.
    InvalidBody -> crate::config::InvalidBody = |c| c.invalid_body.clone();
    /// How the server is made to fail after it claimed a key.
    CrashHook -> crate::config::CrashHook = |c| c.crash.clone();
    /// The second operation's URL.
    SecondOperation -> url::Url = |c| c.second_url.clone();
    /// The other replicas' URLs, at least one.
    Replica -> Vec<url::Url> = |c| (!c.replicas.is_empty()).then(|| c.replicas.clone());
    /// The read operation's URL.
    ReadOperation -> url::Url = |c| c.read_url.clone();
    /// The hook that takes the idempotency store down and back.
    StoreOutageHook -> std::sync::Arc<dyn crate::config::OutageHook> = |c| c.store_outage.clone();
    /// How the suite writes an RFC 8941 key.
    IetfSyntax -> crate::keys::KeySyntax =
        |c| (c.key_carrier.syntax == crate::carrier::Syntax::Ietf).then_some(c.suite.key_syntax);
    /// The key header's name.
    KeyHeader -> String = |c| c.key_carrier.header().map(str::to_string);
    /// The fake provider and where the API's answer names its charge.
    Provider -> crate::config::Downstream = |c| c.provider.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wording SKIP reasons and `idem-check list` have always used.
    #[test]
    fn needs_are_spelt_from_the_inputs() {
        assert_eq!(Need::SecondTenant.option(), "--tenant-b-header");
        assert_eq!(Need::SecondTenant.target_key(), "[tenant-b] headers");
        assert_eq!(
            Need::RestartHook.option(),
            "--restart-cmd (with --ready-url)"
        );
        assert_eq!(
            Need::RestartHook.target_key(),
            "[restart] command (with ready-url)"
        );
        assert_eq!(
            Need::InvalidBody.target_key(),
            "invalid-body (or a JSON object body to derive one from)"
        );
        assert_eq!(
            Need::StoreOutageHook.target_key(),
            "[store-outage] down-command (with up-command)"
        );
        assert_eq!(Need::Replica.target_key(), "replicas");
        assert_eq!(
            Need::CrashHook.option(),
            "--crash-header (with --lease-wait)"
        );
    }
}
