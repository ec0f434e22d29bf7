//! Reading an API description: a file or an http(s) URL, JSON or YAML, into one
//! `serde_json::Value` tree ([`super::document`]), with the nodes its references to other
//! documents name copied in ([`super::external`]).

use std::sync::Arc;

use super::document::{client, fetch_text, parse, Spec, MAX_FETCHED};
use super::SpecError;
use crate::http::Connector;

/// Reads `source` (a path, or an http/https URL), parses it, and follows its references to
/// other documents ([`super::external`]); what is fetched goes through `connector`, so a
/// document is reached the way the run reaches its target (TLS trust, proxy, `--resolve`).
pub async fn load(
    source: &str,
    timeout: std::time::Duration,
    connector: &Arc<Connector>,
) -> Result<Spec, SpecError> {
    let text = if source.starts_with("http://") || source.starts_with("https://") {
        let fail = |m: String| SpecError::new(source, None, m);
        let c = client(connector, timeout).map_err(fail)?;
        fetch_text(&c, source, MAX_FETCHED)
            .await
            .map_err(|why| fail(format!("the API description {why}")))?
    } else {
        std::fs::read_to_string(source).map_err(|e| {
            SpecError::new(
                source,
                None,
                format!("cannot read the API description: {e}"),
            )
        })?
    };
    let mut spec = parse(source, &text)?;
    super::external::bundle(&mut spec, connector).await;
    Ok(spec)
}
