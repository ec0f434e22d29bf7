//! Steps several probes take in the same way, kept in one place so their evidence reads alike.

use crate::check;
use crate::http::exchange::Exchange;
use crate::outcome::Stop;

use super::ProbeCtx;

/// Reads the counter, turning an unreadable counter into the probe's stop.
macro_rules! count_or_stop {
    ($ctx:expr, $role:expr) => {
        match $ctx.count($role, false).await {
            Ok(c) => c,
            Err(stop) => return Some(stop),
        }
    };
}
pub(crate) use count_or_stop;

/// Sends the operation with `key` twice in a row: the first must be accepted (`accepted` check)
/// and the whole pair must execute once (`recognised` check).
pub(crate) async fn accepted_then_recognised(
    ctx: &mut ProbeCtx,
    key: &str,
    accepted: &'static str,
    recognised: &'static str,
) -> Option<Stop> {
    let before = count_or_stop!(ctx, "count before");
    let first = ctx.send("original", ctx.keyed(key)).await;
    ctx.push(check::success(&ctx.spec(accepted), &first));
    if !is_success(&first) {
        return None;
    }
    let retry = ctx.send("retry", ctx.keyed(key)).await;
    let after = count_or_stop!(ctx, "count after");
    let e = ctx.executions(before, after, &[&first, &retry]);
    ctx.push(check::executions(
        &ctx.spec(recognised),
        &e.basis,
        1,
        e.count,
        e.exchanges,
    ));
    None
}

/// Whether the exchange got a 2xx.
pub(crate) fn is_success(ex: &Exchange) -> bool {
    ex.response.as_ref().is_some_and(|r| r.is_success())
}
