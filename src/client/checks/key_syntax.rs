//! `client-key-syntax`: the key is written as its carrier requires.

use crate::check::{GradedCheck, Severity};
use crate::client::sent_key::Syntax;
use crate::keys::KeySyntax;
use crate::outcome::Stop;

use super::{ClientProbe, Findings, Judging};

const KEY_SYNTAX: GradedCheck = GradedCheck::new(
    Severity::Required,
    "key-syntax",
    "the key is written as the suite requires",
);

pub const PROBE: ClientProbe = ClientProbe {
    id: "client-key-syntax",
        section: "draft-07 §2.1, RFC 8941 §3.3.3",
        stimulus: "Runs the command once against a server that answers normally",
        requirement: "The key is written as its carrier requires: an RFC 8941 String in the draft's Idempotency-Key (bare values are fine under stripe), any non-empty value under a token carrier (a provider's header or a body field)",
        scenarios: &["created"],
        checks: &[KEY_SYNTAX],
        judge,
};

fn judge(j: &Judging) -> Findings {
    let mut out = Findings::default();
    for r in j.records {
        let Some(a) = out.first(j, r, 1) else {
            continue;
        };
        let Some(key) = &a.key else {
            out.stop = Some(Stop::Inconclusive(
                "no key was sent, so there is no syntax to judge (see client-key-present)".into(),
            ));
            continue;
        };
        if j.carrier.syntax == Syntax::Token {
            // The provider's own rules: any non-empty value is a key, and quotes would be
            // part of it, so nothing here may ask for them.
            out.checks.push(KEY_SYNTAX.judge(
                !key.value.is_empty(),
                format!("a non-empty opaque key ({})", j.carrier),
                format!("{}: {}", j.carrier.label(), key.raw),
                vec![a.exchange.n],
            ));
            continue;
        }
        let (passed, expected) = match j.key_syntax {
            KeySyntax::SfString => (
                key.sf_string,
                "an RFC 8941 String, e.g. \"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
            ),
            KeySyntax::Bare => (
                !key.value.is_empty(),
                "a non-empty key, bare or as an RFC 8941 String",
            ),
        };
        let actual = if key.sf_string {
            format!("an RFC 8941 String: {}", key.raw)
        } else {
            format!("not an RFC 8941 String: {}", key.raw)
        };
        out.checks
            .push(KEY_SYNTAX.judge(passed, expected, actual, vec![a.exchange.n]));
    }
    out
}
