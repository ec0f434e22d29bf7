//! The TLS servers of the tests: one acceptor builder for every certificate, ALPN list and
//! client-certificate policy they need.

use std::path::PathBuf;
use std::sync::Arc;

use idem_check::http::tls::TlsOptions;
use idem_check::http::Connector;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// A self-signed certificate for `localhost` and 127.0.0.1, for tests that only need TLS.
pub const CERT: &[u8] = include_bytes!("../../data/race_engine/cert.pem");
/// The private key of [`CERT`].
pub const KEY: &[u8] = include_bytes!("../../data/race_engine/key.pem");

/// A server presenting the PEM `chain` and `key`, offering `alpn` (none when empty); with
/// `client_ca`, only clients with a certificate signed by that PEM CA get in.
pub fn acceptor(chain: &[u8], key: &[u8], alpn: &[&[u8]], client_ca: Option<&[u8]>) -> TlsAcceptor {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
        .collect::<Result<_, _>>()
        .expect("PEM certificate chain");
    let key = PrivateKeyDer::from_pem_slice(key).expect("PEM private key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca) {
                roots.add(cert.expect("PEM CA")).expect("CA certificate");
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                .build()
                .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .expect("certificate and key match");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsAcceptor::from(Arc::new(config))
}

/// A run's connector that trusts [`CERT`] besides the public roots, as `--cacert` with its
/// file would.
pub fn trusting_test_cert() -> Connector {
    let cacert = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/race_engine/cert.pem");
    let tls = TlsOptions {
        cacert: Some(cacert),
        ..TlsOptions::default()
    };
    Connector::new(&tls, &Default::default()).expect("the test certificate is readable PEM")
}

/// A server presenting [`CERT`], offering `alpn`, asking for no client certificate.
pub fn test_acceptor(alpn: &[&[u8]]) -> TlsAcceptor {
    acceptor(CERT, KEY, alpn, None)
}
