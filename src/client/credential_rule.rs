//! Which credential the fake API asks for, and what each request carried.
//!
//! SDKs authenticate in their own way (Stripe's with a bearer token, Modern Treasury's with
//! Basic, many with an API-key header), and an SDK's create method cannot be told to do
//! otherwise; so the fake takes `$IDEM_CHECK_TOKEN` in any of these forms, or none, and records
//! which one came. No scenario depends on it: the credential only has to be right, so a client
//! that forgot it is told so instead of being judged on retries it never got to make.

use base64::Engine as _;

/// What the fake API accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer $IDEM_CHECK_TOKEN`.
    Bearer,
    /// `Authorization: Basic …` with the token as user name or as password.
    Basic,
    /// The token as the value of this header.
    Header(String),
    /// Nothing is required.
    None,
    /// Any of the forms above with the token, or no credential at all.
    Any,
}

impl std::str::FromStr for Auth {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "bearer" => Ok(Auth::Bearer),
            "basic" => Ok(Auth::Basic),
            "none" => Ok(Auth::None),
            "any" => Ok(Auth::Any),
            _ => match s.split_once(':') {
                Some((kind, name)) if kind.eq_ignore_ascii_case("header") && !name.is_empty() => {
                    Ok(Auth::Header(name.to_string()))
                }
                _ => Err(format!(
                    "{s:?} is not a credential kind: bearer, basic, header:NAME, none or any"
                )),
            },
        }
    }
}

impl Auth {
    /// "Authorization: Bearer $IDEM_CHECK_TOKEN", what a refused client is told to send.
    pub fn wanted(&self, env: &str) -> String {
        match self {
            Auth::Bearer => format!("Authorization: Bearer ${env}"),
            Auth::Basic => format!("Authorization: Basic with ${env} as user name or password"),
            Auth::Header(name) => format!("{name}: ${env}"),
            Auth::None | Auth::Any => "any credential or none".into(),
        }
    }

    /// The credential a request carried, judged against the rule: `Ok` with its kind when
    /// accepted, `Err` with the kind seen when not.
    pub fn check(&self, headers: &hyper::HeaderMap, token: &str) -> Result<String, String> {
        let seen = seen(headers, token, self);
        let accepted = match (self, &seen) {
            (Auth::None | Auth::Any, Seen::Nothing) => true,
            (Auth::None, _) => true,
            (Auth::Any, s) => s.valid(),
            (Auth::Bearer, Seen::Bearer(ok)) | (Auth::Basic, Seen::Basic(ok)) => *ok,
            (Auth::Header(_), Seen::Header(_, ok)) => *ok,
            _ => false,
        };
        if accepted {
            Ok(seen.kind())
        } else {
            Err(seen.kind())
        }
    }
}

/// The credential found in a request.
enum Seen {
    Bearer(bool),
    Basic(bool),
    /// An API-key header with the token (or the named header, right or wrong).
    Header(String, bool),
    Other,
    Nothing,
}

impl Seen {
    fn valid(&self) -> bool {
        match self {
            Seen::Bearer(ok) | Seen::Basic(ok) | Seen::Header(_, ok) => *ok,
            Seen::Other | Seen::Nothing => false,
        }
    }

    /// "bearer", "basic", "header X-Api-Key", "another Authorization scheme", "none";
    /// " (wrong token)" when the token does not match.
    fn kind(&self) -> String {
        let wrong = |ok: bool| if ok { "" } else { " (wrong token)" };
        match self {
            Seen::Bearer(ok) => format!("bearer{}", wrong(*ok)),
            Seen::Basic(ok) => format!("basic{}", wrong(*ok)),
            Seen::Header(name, ok) => format!("header {name}{}", wrong(*ok)),
            Seen::Other => "another Authorization scheme".into(),
            Seen::Nothing => "none".into(),
        }
    }
}

fn seen(headers: &hyper::HeaderMap, token: &str, rule: &Auth) -> Seen {
    if let Auth::Header(name) = rule {
        if let Some(v) = headers.get(name.as_str()) {
            return Seen::Header(name.clone(), v.as_bytes() == token.as_bytes());
        }
    }
    if let Some(v) = headers.get("authorization") {
        let v = String::from_utf8_lossy(v.as_bytes());
        let (scheme, rest) = v.split_once(' ').unwrap_or((&v, ""));
        let rest = rest.trim();
        return if scheme.eq_ignore_ascii_case("bearer") {
            Seen::Bearer(rest == token)
        } else if scheme.eq_ignore_ascii_case("basic") {
            let pair = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            let (user, password) = pair.split_once(':').unwrap_or((&pair, ""));
            Seen::Basic(user == token || password == token)
        } else if rest.is_empty() && scheme == token {
            // A bare token in Authorization, as some SDKs send it.
            Seen::Header("Authorization".into(), true)
        } else {
            Seen::Other
        };
    }
    // An API-key header under any name: the token as the whole value.
    headers
        .iter()
        .find(|(_, v)| v.as_bytes() == token.as_bytes())
        .map_or(Seen::Nothing, |(n, _)| {
            Seen::Header(n.as_str().to_string(), true)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        for (n, v) in pairs {
            h.insert(*n, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn every_form_of_the_token_is_recognised_and_recorded() {
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("org:t0k")
        );
        let any = Auth::Any;
        let h = headers;
        assert_eq!(
            any.check(&h(&[("authorization", "Bearer t0k")]), "t0k"),
            Ok("bearer".into())
        );
        assert_eq!(
            any.check(&h(&[("authorization", &basic)]), "t0k"),
            Ok("basic".into())
        );
        assert_eq!(
            any.check(&h(&[("x-api-key", "t0k")]), "t0k"),
            Ok("header x-api-key".into())
        );
        assert_eq!(any.check(&h(&[]), "t0k"), Ok("none".into()));
        assert_eq!(
            any.check(&h(&[("authorization", "Bearer nope")]), "t0k"),
            Err("bearer (wrong token)".into())
        );
        assert_eq!(Auth::Bearer.check(&h(&[]), "t0k"), Err("none".into()));
        assert_eq!(
            Auth::Header("X-Key".into()).check(&h(&[("x-key", "t0k")]), "t0k"),
            Ok("header X-Key".into())
        );
        assert_eq!(
            "header:X-Key".parse::<Auth>(),
            Ok(Auth::Header("X-Key".into()))
        );
        assert!("cookie".parse::<Auth>().is_err());
    }
}
