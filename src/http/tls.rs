//! TLS for the raw client and the bursts: rustls with ALPN `http/1.1` only, or `h2` first.
//!
//! The raw client speaks HTTP/1.1 byte for byte, so it must never let a server pick h2 under it;
//! the HTTP/2 burst ([`super::h2burst`]) offers `h2` (then `http/1.1`) and learns from the
//! server's pick whether the single-packet release is possible.
//! Trust comes from the Mozilla roots (webpki-roots) plus any extra roots the user configured
//! (a private CA, or a test certificate), kept process-wide because the probe-facing functions
//! (`raw::send_one`, `burst::burst`) take no TLS argument: trust is a property of the run, not of
//! one request.

use std::sync::{Arc, RwLock};

use anyhow::Context;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// The configurations in force (`http/1.1` only, and `h2` first); `None` until first use or
/// until roots are added.
static CONFIG: RwLock<Option<Configs>> = RwLock::new(None);

#[derive(Clone)]
struct Configs {
    h1: Arc<ClientConfig>,
    h2: Arc<ClientConfig>,
}

/// Extra trust anchors added by [`trust_pem`], kept so the config can be rebuilt.
static EXTRA_ROOTS: RwLock<Vec<CertificateDer<'static>>> = RwLock::new(Vec::new());

/// Trusts the PEM certificates in `pem` in addition to the public roots, for every later TLS
/// connection of the process (e.g. `--cacert` for a staging API behind a private CA).
pub fn trust_pem(pem: &[u8]) -> anyhow::Result<()> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .context("reading PEM certificates")?;
    if certs.is_empty() {
        anyhow::bail!("no PEM certificate found");
    }
    let mut extra = EXTRA_ROOTS.write().unwrap_or_else(|e| e.into_inner());
    extra.extend(certs);
    let configs = build(&extra)?;
    *CONFIG.write().unwrap_or_else(|e| e.into_inner()) = Some(configs);
    Ok(())
}

fn build(extra: &[CertificateDer<'static>]) -> anyhow::Result<Configs> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in extra {
        roots
            .add(cert.clone())
            .context("adding a trusted certificate")?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut h2 = config.clone();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    h2.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Configs {
        h1: Arc::new(config),
        h2: Arc::new(h2),
    })
}

fn configs() -> anyhow::Result<Configs> {
    if let Some(c) = CONFIG.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return Ok(c.clone());
    }
    let extra = EXTRA_ROOTS.read().unwrap_or_else(|e| e.into_inner());
    let built = build(&extra)?;
    *CONFIG.write().unwrap_or_else(|e| e.into_inner()) = Some(built.clone());
    Ok(built)
}

/// Runs the TLS handshake for `host` over an open TCP stream, offering only `http/1.1`. Errors
/// read "TLS handshake failed: …" so a report says which layer broke.
pub async fn handshake(tcp: TcpStream, host: &str) -> Result<TlsStream<TcpStream>, String> {
    let config = configs()
        .map_err(|e| format!("TLS setup failed: {e:#}"))?
        .h1;
    connect(config, tcp, host).await
}

/// Like [`handshake`], but offers `h2` before `http/1.1`; the flag says whether the server
/// picked `h2`, which is what decides between the single-packet and the last-byte burst.
pub async fn handshake_h2(
    tcp: TcpStream,
    host: &str,
) -> Result<(TlsStream<TcpStream>, bool), String> {
    let config = configs()
        .map_err(|e| format!("TLS setup failed: {e:#}"))?
        .h2;
    let tls = connect(config, tcp, host).await?;
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    Ok((tls, h2))
}

async fn connect(
    config: Arc<ClientConfig>,
    tcp: TcpStream,
    host: &str,
) -> Result<TlsStream<TcpStream>, String> {
    let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']'))
        .map_err(|e| format!("TLS handshake failed: invalid server name {host:?}: {e}"))?
        .to_owned();
    TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake failed: {e}"))
}
