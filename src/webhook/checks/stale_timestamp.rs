//! `wh-stale-timestamp`: a valid signature over a timestamp older than the scheme's tolerance
//! (a captured delivery replayed later) is refused and not applied.

use futures::FutureExt;

use super::parts::outside_tolerance;
use super::{no_extra_time, WebhookCheck, SECTION};
use crate::check::{GradedCheck, Severity};

const REFUSED: GradedCheck = GradedCheck::new(
    Severity::Required,
    "refused",
    "a delivery outside the tolerance is refused 4xx",
);
const NOT_APPLIED: GradedCheck = GradedCheck::new(
    Severity::Critical,
    "not-applied",
    "a delivery outside the tolerance is not applied",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-stale-timestamp",
    section: SECTION,
    stimulus: "Sends a valid signature over a timestamp older than the scheme's tolerance.",
    requirement: "A delivery signed too long ago is refused 4xx and not applied.",
    judged: &[REFUSED, NOT_APPLIED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| {
        outside_tolerance(
            env,
            trial,
            -1,
            "signed 6 minutes ago",
            [&REFUSED, &NOT_APPLIED],
        )
        .boxed()
    },
};
