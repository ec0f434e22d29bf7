//! How many times did the operation really execute?
//!
//! A black-box checker cannot see the server's database, so it counts effects with the strongest
//! basis the user gave (CONTRACT "Observing effects"): an effect counter read before and after
//! (`--count-url` + `--count-pointer`, or `--count-cmd`), else the distinct resource ids in the
//! 2xx bodies (`--id-pointer`), else the distinct 2xx bodies themselves. Every verdict names its
//! basis, so a user knows how much to trust it.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::config::Counter;
use crate::http::exchange::Exchange;

/// An execution count and the basis it was computed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executions {
    pub count: u64,
    /// "counter GET http://…/count at /count", "distinct ids at /id", "distinct 2xx bodies".
    pub basis: String,
    /// The exchanges the count was computed from.
    pub exchanges: Vec<usize>,
}

/// Counts executions among `attempts` with the strongest available basis.
pub fn executions(
    counter: Option<&Counter>,
    id_pointer: Option<&str>,
    before: Option<u64>,
    after: Option<u64>,
    attempts: &[&Exchange],
) -> Executions {
    let exchanges: Vec<usize> = attempts.iter().map(|e| e.n).collect();
    let mut caveat = String::new();
    if let (Some(counter), Some(b), Some(a)) = (counter, before, after) {
        if a >= b {
            return Executions {
                count: a - b,
                basis: format!("counter {} ({b} before, {a} after)", counter.describe()),
                exchanges,
            };
        }
        // A counter that goes backwards cannot count executions; it is itself evidence that
        // records were lost, and the weaker bases still can count.
        caveat = format!("; the counter went backwards from {b} to {a}: the target lost records");
    }
    let successes = attempts
        .iter()
        .filter(|e| e.response.as_ref().is_some_and(|r| r.is_success()));
    if let Some(pointer) = id_pointer {
        let ids: BTreeSet<String> = successes
            .filter_map(|e| resource_id(e, Some(pointer)))
            .collect();
        return Executions {
            count: ids.len() as u64,
            basis: format!("distinct resource ids at {pointer} in 2xx bodies{caveat}"),
            exchanges,
        };
    }
    let bodies: BTreeSet<&[u8]> = successes
        .filter_map(|e| e.response.as_ref().map(|r| r.body.as_slice()))
        .collect();
    Executions {
        count: bodies.len() as u64,
        basis: format!(
            "distinct 2xx bodies (weakest basis: give --id-pointer or --count-url){caveat}"
        ),
        exchanges,
    }
}

/// The resource id in a 2xx JSON body at `pointer`, as text.
pub fn resource_id(ex: &Exchange, pointer: Option<&str>) -> Option<String> {
    let value = ex.response.as_ref()?.json()?;
    match value.pointer(pointer?)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Reads a counter response: a 2xx whose JSON body has a non-negative integer at `pointer`.
pub fn read_counter(ex: &Exchange, pointer: &str) -> Result<u64, String> {
    let r = ex
        .response
        .as_ref()
        .ok_or_else(|| ex.error.clone().unwrap_or_else(|| "no response".into()))?;
    if !r.is_success() {
        return Err(format!("status {}", r.status));
    }
    let json = r.json().ok_or("the body is not JSON")?;
    let v = json
        .pointer(pointer)
        .ok_or_else(|| format!("nothing at {pointer} in the body"))?;
    parse_count(v).ok_or_else(|| format!("{v} at {pointer} is not a non-negative integer"))
}

fn parse_count(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Runs `--count-cmd` through the shell and parses the number it prints. Returns the value and
/// a one-line description for the timeline.
pub async fn run_count_cmd(cmd: &str, timeout: Duration) -> (Result<u64, String>, String) {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(timeout, child).await {
        Err(_) => {
            let e = format!("timed out after {} s", timeout.as_secs_f64());
            return (Err(e.clone()), format!("count command {e}"));
        }
        Ok(Err(e)) => {
            let e = format!("could not start sh: {e}");
            return (Err(e.clone()), e);
        }
        Ok(Ok(out)) => out,
    };
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        let e = format!(
            "exited with {} ({})",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return (Err(e.clone()), format!("count command {e}"));
    }
    match text.parse::<u64>() {
        Ok(n) => (Ok(n), format!("count command printed {n}")),
        Err(_) => {
            let e = format!("printed {text:?}, not a number");
            (Err(e.clone()), format!("count command {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::test_exchange as ex;

    #[test]
    fn ids_beat_bodies_and_ignore_errors() {
        let a = ex(1, 201, r#"{"id":"p1","t":1}"#);
        let b = ex(2, 201, r#"{"id":"p1","t":2}"#);
        let c = ex(3, 409, r#"{"id":"p2"}"#);
        let by_id = executions(None, Some("/id"), None, None, &[&a, &b, &c]);
        assert_eq!(by_id.count, 1);
        let by_body = executions(None, None, None, None, &[&a, &b, &c]);
        assert_eq!(by_body.count, 2);
    }

    #[test]
    fn counter_delta_is_the_strongest_basis() {
        let counter = Counter::Url {
            url: "http://127.0.0.1/count".parse().unwrap(),
            pointer: "/count".into(),
        };
        let a = ex(1, 201, r#"{"id":"p1"}"#);
        let e = executions(Some(&counter), Some("/id"), Some(4), Some(6), &[&a]);
        assert_eq!(e.count, 2);
        assert!(e.basis.starts_with("counter"));
    }

    #[test]
    fn a_counter_going_backwards_falls_back_to_ids() {
        let counter = Counter::Url {
            url: "http://127.0.0.1/count".parse().unwrap(),
            pointer: "/count".into(),
        };
        let a = ex(1, 201, r#"{"id":"p1"}"#);
        let b = ex(2, 201, r#"{"id":"p2"}"#);
        let e = executions(Some(&counter), Some("/id"), Some(18), Some(1), &[&a, &b]);
        assert_eq!(e.count, 2);
        assert!(e.basis.contains("went backwards from 18 to 1"));
    }

    #[test]
    fn counter_reads_are_strict() {
        assert_eq!(read_counter(&ex(1, 200, r#"{"count":7}"#), "/count"), Ok(7));
        assert!(read_counter(&ex(1, 200, r#"{"count":-1}"#), "/count").is_err());
        assert!(read_counter(&ex(1, 500, r#"{"count":7}"#), "/count").is_err());
        assert!(read_counter(&ex(1, 200, "seven"), "/count").is_err());
    }
}
