//! `wh-future-timestamp`: a valid signature over a timestamp beyond the tolerance in the future
//! is refused. Recommended only: a sender's clock may run ahead, and nothing was replayed.

use futures::FutureExt;

use super::parts::outside_tolerance;
use super::{no_extra_time, WebhookCheck, SECTION};
use crate::check::{GradedCheck, Severity};

const REFUSED: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "refused",
    "a delivery outside the tolerance is refused 4xx",
);
const NOT_APPLIED: GradedCheck = GradedCheck::new(
    Severity::Recommended,
    "not-applied",
    "a delivery outside the tolerance is not applied",
);

pub const CHECK: WebhookCheck = WebhookCheck {
    id: "wh-future-timestamp",
    section: SECTION,
    stimulus: "Sends a valid signature over a timestamp beyond the tolerance in the future.",
    requirement: "A delivery signed in the future is refused 4xx.",
    judged: &[REFUSED, NOT_APPLIED],
    needs: &[],
    calibrates: false,
    extra_time: no_extra_time,
    play: |env, trial| {
        outside_tolerance(
            env,
            trial,
            1,
            "signed 6 minutes ahead",
            [&REFUSED, &NOT_APPLIED],
        )
        .boxed()
    },
};
