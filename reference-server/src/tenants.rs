//! `Authorization: Bearer <token>` → tenant.
//!
//! The tenant is part of every idempotency scope (draft §5: the lookup key must include
//! something only the server knows about the client). It therefore comes from the credential,
//! never from a header the client could set to another tenant's name.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};

use crate::config::Tenant;
use crate::problem::Problem;

/// The tenants a server instance knows, indexed by token.
#[derive(Debug)]
pub(crate) struct Tenants {
    by_token: HashMap<String, Arc<str>>,
}

impl Tenants {
    pub(crate) fn new(tenants: &[Tenant]) -> Self {
        Self {
            by_token: tenants
                .iter()
                .map(|t| (t.token.clone(), Arc::from(t.name.as_str())))
                .collect(),
        }
    }

    /// The caller's tenant, or the 401 to send.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<str>, Problem> {
        let unauthorized = |detail: &str| {
            Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Unauthorized",
                detail,
            )
        };
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(unauthorized(
                "send exactly one Authorization: Bearer <token> header",
            ));
        };
        let value = value
            .to_str()
            .map_err(|_| unauthorized("the Authorization header is not ASCII"))?;
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .ok_or_else(|| unauthorized("use the Bearer scheme: Authorization: Bearer <token>"))?;
        self.by_token
            .get(token)
            .cloned()
            .ok_or_else(|| unauthorized("unknown bearer token"))
    }
}
