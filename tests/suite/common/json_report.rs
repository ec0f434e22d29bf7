//! Reading a report written with `--report-json`, as the tests check it.

use serde_json::Value;

/// `(probe id, outcome)` of every probe of `report` (a run report's object, with its `probes`),
/// in report order.
pub fn probe_outcomes<C: FromIterator<(String, String)>>(report: &Value) -> C {
    report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
