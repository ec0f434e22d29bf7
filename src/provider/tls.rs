//! `--provider-tls CA_FILE`: the fake provider over HTTPS. Provider SDKs are pointed at
//! `https://` base URLs and some refuse anything else, so the fake makes a CA of its own at
//! start (nothing to install beforehand, nothing that outlives the run), signs a server
//! certificate for every name the API may call it by, and writes the CA certificate where the
//! user said, for the API under test to trust (`SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`,
//! `REQUESTS_CA_BUNDLE`, the reference server's `--provider-ca`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Why the fake's HTTPS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot write the CA certificate to {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot make the fake provider's certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("cannot set up TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The fake's HTTPS side: what accepts connections, and where its CA was written.
#[derive(Clone)]
pub struct Tls {
    pub(crate) acceptor: TlsAcceptor,
    pub ca_file: PathBuf,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls(CA in {})", self.ca_file.display())
    }
}

/// The names the server certificate covers: 127.0.0.1, localhost, and the host of `listen`
/// (`0.0.0.0:4010` or `provider.test:4010` adds that host), so the API may call it by any.
pub fn names(listen: &str) -> Vec<String> {
    let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let host = listen
        .rsplit_once(':')
        .map_or(listen, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    if !host.is_empty() && !names.iter().any(|n| n == host) {
        names.push(host.to_string());
    }
    names
}

/// Makes a CA and a server certificate for `names`, writes the CA certificate (PEM) to
/// `ca_file`, and returns the acceptor that serves with the server certificate.
pub fn generate(names: Vec<String>, ca_file: &Path) -> Result<Tls, TlsError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "idem-check fake provider CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let mut leaf_params = CertificateParams::new(names)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "idem-check fake provider");
    let leaf = leaf_params.signed_by(&key, &ca)?;
    std::fs::write(ca_file, ca.pem()).map_err(|source| TlsError::Write {
        path: ca_file.display().to_string(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let der = PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| rustls::Error::General(e.to_string()))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(leaf.der().to_vec())], der)?;
    // The fake speaks HTTP/1.1 only (hyper's connection API, so a step can close without
    // answering).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca_file: ca_file.to_path_buf(),
    })
}

/// A TLS connection opens with a handshake record (content type 22); anything else on the
/// fake's HTTPS port is a plain-HTTP client, answered so it says what is wrong.
pub(crate) fn starts_handshake(first: u8) -> bool {
    first == 0x16
}

/// The answer to a plain-HTTP request on the HTTPS port, as nginx gives one: a 400 that names
/// the scheme to use, then the connection is closed.
pub(crate) fn plain_http_answer(addr: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "error": "plain_http_to_https",
        "message": format!(
            "this fake provider serves HTTPS (--provider-tls): call https://{addr}, trusting the CA it wrote"
        ),
    })
    .to_string();
    format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_covers_loopback_and_the_listen_host() {
        assert_eq!(names("127.0.0.1:0"), vec!["127.0.0.1", "localhost"]);
        assert_eq!(
            names("provider.test:4010"),
            vec!["127.0.0.1", "localhost", "provider.test"]
        );
        assert_eq!(names("[::1]:4010"), vec!["127.0.0.1", "localhost", "::1"]);
    }

    #[test]
    fn an_unwritable_ca_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("ca.pem");
        let err = generate(names("127.0.0.1:0"), &path).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "cannot write the CA certificate to {}",
                path.display()
            )),
            "{err}"
        );
    }
}
